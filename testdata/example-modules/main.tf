# A configuration that calls a registry module, as most do: `tfinstall
# init` installs the module, then the providers, with no `terraform get`
# first. Unlike ../example, it needs the network (registry.terraform.io,
# and github.com where the module lives).
#
#   tfinstall -chdir=testdata/example-modules init

module "label" {
  source  = "cloudposse/label/null"
  version = "0.25.0"

  namespace = "eg"
  name      = "app"
}

resource "random_pet" "server" {}
