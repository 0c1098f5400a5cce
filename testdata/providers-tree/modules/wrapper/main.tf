module "inner" {
  source = "../inner"
}
