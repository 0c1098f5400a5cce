module "eks" {
  source  = "terraform-aws-modules/eks/aws"
  version = "~> 20.0"
}

module "shared" {
  source = "../does-not-exist"
}

resource "aws_iam_role" "admin" {
  name = "admin"
}
