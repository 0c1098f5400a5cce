terraform {
  required_providers {
    AWS = {
      source = "hashicorp/aws"
    }
    google = {
      source   = "hashicorp/google"
      versions = "~> 5.0"
    }
    random = {
      source = "hashicorp/random/extra/part"
    }
    null = "greater than one"
  }
}
