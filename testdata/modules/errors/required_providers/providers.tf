terraform {
  required_providers {
    tls = {
      source = "hashicorp/tls"
    }
  }
}
