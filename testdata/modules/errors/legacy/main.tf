terraform {
  required_providers {
    aws = {
      source = "-/aws"
    }
  }
}
