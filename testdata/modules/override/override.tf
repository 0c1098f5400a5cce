# Replaces the whole "aws" entry (the 4.x constraint is gone) and adds one.
terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.40"
    }
    corp = {
      source  = "registry.example.com/mycorp/corp"
      version = "1.2.3"
    }
  }
}
