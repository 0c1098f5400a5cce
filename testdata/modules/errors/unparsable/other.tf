provider "aws" {
  region = "eu-west-1"
}
