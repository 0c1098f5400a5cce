terraform {
  required_providers {
    # The child module tightens the root module's constraint.
    random = {
      source  = "hashicorp/random"
      version = "< 3.6.0"
    }
  }
}

resource "random_id" "suffix" {
  byte_length = 4
}
