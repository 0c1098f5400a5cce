variable "name" {
  type = string
}

resource "aws_vpc" "this" {
  cidr_block = "10.0.0.0/16"
  tags       = { Name = var.name }
}

data "template_file" "cloudinit" {
  template = file("${path.module}/cloudinit.yaml")
}

module "endpoints" {
  source = "./modules/vpc-endpoints"
  vpc_id = aws_vpc.this.id
}
