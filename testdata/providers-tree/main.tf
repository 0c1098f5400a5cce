terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = "~> 3.5"
    }
  }
}

module "topology" {
  source = "./modules/topology"
}

module "network" {
  source = "./modules/network"
}

module "wrapper" {
  source = "./modules/wrapper"
}
