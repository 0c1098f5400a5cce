locals {
  labels = { name = local.case == "none" ? local.name :
    lower(local.name) }
}
