resource "null_resource" "x" {}

module "labels" {
  source = "../empty_child"
}
