provider "aws" {
  region = var.region

  default_tags {
    tags = {
      Environment = var.environment
      ManagedBy   = "terraform"
    }
  }
}

provider "aws" {
  alias  = "west"
  region = "us-west-2"
}

data "aws_ami" "ubuntu" {
  most_recent = true
  owners      = ["099720109477"]

  filter {
    name   = "name"
    values = ["ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*"]
  }
}

resource "aws_instance" "web" {
  for_each      = toset(var.zones)
  ami           = data.aws_ami.ubuntu.id
  instance_type = var.environment == "prod" ? "m5.large" : "t3.micro"
  user_data     = <<-EOT
    #!/bin/bash
    echo "zone ${each.key}" > /etc/zone
    %{~ for name in var.users ~}
    useradd ${name}
    %{~ endfor ~}
  EOT

  dynamic "ebs_block_device" {
    for_each = { for idx, size in var.volume_sizes : idx => size if size > 0 }
    content {
      device_name = "/dev/sd${substr("fghijk", ebs_block_device.key, 1)}"
      volume_size = ebs_block_device.value
    }
  }

  tags = merge(local.common_tags, {
    Name = "web-${each.key}"
    Arn  = provider::aws::arn_build("aws", "ec2", var.region, "123456789012", "instance/web")
  })

  lifecycle {
    ignore_changes = [tags["LastScanned"], ami]
  }
}

resource "aws_s3_bucket" "logs" {
  provider = aws.west
  bucket   = "example-logs-${random_id.suffix.hex}"
}

resource "random_id" "suffix" {
  byte_length = 4
}

resource "null_resource" "bootstrap" {
  triggers = {
    ids = join(",", [for i in aws_instance.web : i.id])
  }
}

data "terraform_remote_state" "shared" {
  backend = "s3"
  config = {
    bucket = "example-tfstate"
    key    = "shared/terraform.tfstate"
    region = "eu-west-1"
  }
}

data "http" "checkpoint" {
  url = "https://checkpoint-api.hashicorp.com/v1/check/terraform"
}

ephemeral "random_password" "db" {
  length = 24
}

resource "ourcloud_server" "app" {
  name = "app"
}

check "dns" {
  data "dns_a_record_set" "www" {
    host = "www.example.com"
  }

  assert {
    condition     = length(data.dns_a_record_set.www.addrs) > 0
    error_message = "www.example.com has no A records."
  }
}

# Generates configuration for a resource not declared yet.
import {
  to = time_static.created
  id = "2024-01-01T00:00:00Z"
}

# Imports into a declared resource: its provider comes from the resource.
import {
  to = aws_instance.web["eu-west-1a"]
  id = "i-0123456789abcdef0"
}

module "network" {
  source = "./modules/network"
  cidr   = "10.0.0.0/16"

  providers = {
    aws      = aws
    aws.west = aws.west
  }
}

module "vpc" {
  source  = "terraform-aws-modules/vpc/aws"
  version = "5.1.2"
  name    = "main"
}
