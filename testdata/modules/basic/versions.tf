terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
    random = {
      source = "hashicorp/random"
    }
    ourcloud = {
      source  = "terraform.example.com/examplecorp/ourcloud"
      version = ">= 1.0"
    }
    # Terraform 0.12-style entry: a bare version constraint.
    null = "~> 3.2"
    tls = {
      version = ">= 4.0.0"
    }
  }

  backend "s3" {
    bucket = "example-tfstate"
    key    = "prod/terraform.tfstate"
    region = "eu-west-1"
  }
}
