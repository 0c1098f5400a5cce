terraform {
  required_providers {
    cloudflare = {
      source  = "cloudflare/cloudflare"
      version = "~> 4.0"
    }
  }
}

variable "vpc_id" {
  type = string
}

resource "aws_subnet" "private" {
  count      = 3
  vpc_id     = var.vpc_id
  cidr_block = cidrsubnet("10.0.0.0/16", 8, count.index)
}

resource "cloudflare_record" "api" {
  zone_id = "0123456789abcdef"
  name    = "api"
  type    = "CNAME"
  content = "api.internal.example.com"
}
