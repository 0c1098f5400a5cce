locals {
  common_tags = {
    Project = "example"
    Owner   = lower("Platform-Team")
  }
  zone_map = { for z in var.zones : z => upper(z) }
  banner   = "Deploying $${literal} to %{ if var.environment == "prod" }production%{ else }staging%{ endif }"
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "environment" {
  type = string
}

variable "zones" {
  type    = list(string)
  default = ["eu-west-1a", "eu-west-1b"]
}

variable "users" {
  type    = list(string)
  default = []
}

variable "volume_sizes" {
  type    = list(number)
  default = [0, 50]
}
