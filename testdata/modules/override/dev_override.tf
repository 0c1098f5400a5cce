provider "aws" {
  alias   = "backup"
  version = "~> 5.41"
}

resource "mycorp_thing" "x" {
  provider = corp
}
