# The policy `providers check` is held to in tests/policy.rs: only
# HashiCorp's providers from 3.0 on, and never the hashicorp/aws release
# a team found broken. Rule lines are part of the expected output.
default = "deny"

allow "registry.terraform.io/hashicorp/*" {
  versions = ">= 3.0.0"
}

deny "registry.terraform.io/hashicorp/aws" {
  versions = "5.31.0"
}
