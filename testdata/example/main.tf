# A small configuration for trying tfinstall without any network: the
# providers come from the filesystem mirror in ./mirror.
#
#   cargo run --release -- -chdir=testdata/example init -plugin-dir=mirror

terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = "~> 3.5"
    }
    widget = {
      source  = "example.com/acme/widget"
      version = ">= 1.0.0"
    }
  }
}

# No required_providers entry: implied as hashicorp/null.
resource "null_resource" "hello" {}

module "network" {
  source = "./modules/network"
}
