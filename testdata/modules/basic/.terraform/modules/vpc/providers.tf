provider "template" {
  version = "~> 2.2"
}
