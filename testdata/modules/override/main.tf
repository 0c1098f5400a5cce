terraform {
  required_providers {
    aws    = { source = "hashicorp/aws", version = "~> 4.67" }
    random = { source = "hashicorp/random", version = "~> 3.5" }
  }
}

provider "aws" {
  region = "eu-central-1"
}

provider "aws" {
  alias  = "backup"
  region = "eu-north-1"
}

resource "aws_instance" "app" {
  ami           = "ami-0123456789abcdef0"
  instance_type = "t3.small"
}

resource "random_pet" "name" {}

# Until the override below points it at the in-house provider, this would
# imply hashicorp/mycorp.
resource "mycorp_thing" "x" {
  name = random_pet.name.id
}
