terraform {
  required_providers {
    aws = {
      source                = "hashicorp/aws"
      version               = ">= 5.10.0"
      configuration_aliases = [aws.west]
    }
  }
}

variable "cidr" {
  type = string
}

resource "aws_vpc" "this" {
  cidr_block = var.cidr
}

resource "aws_flow_log" "west" {
  provider        = aws.west
  log_destination = "arn:aws:s3:::example-flow-logs"
  vpc_id          = aws_vpc.this.id
}

module "subnets" {
  source = "../subnets"
  vpc_id = aws_vpc.this.id
}
