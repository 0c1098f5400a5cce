#!/usr/bin/env python3
"""Writes a configuration of N `.tf` files (default 1000) into DIR, for
timing how long tfinstall takes to read a configuration's requirements
(`tfinstall providers` reads every file and prints what it found).

Each file holds what real modules hold: variables, locals with `for`
expressions, conditionals and templates, a data source and resources with
`for_each`, and every tenth file a provider block; `versions.tf` requires
ten providers. The files are the same on every run.

    python3 bench/many-tf-files.py /tmp/many 1000
    time tfinstall providers   # in /tmp/many
"""

import os
import sys

PROVIDERS = ["aws", "google", "azurerm", "random", "null", "tls", "local", "http", "time", "archive"]

FILE = """variable "names_{i}" {{
  type        = list(string)
  description = "Names for group {i}, one resource each."
  default     = ["a{i}", "b{i}", "c{i}"]
}}

locals {{
  tags_{i} = merge(var.common_tags, {{
    Group = "group-{i}"
    Index = {i}
  }})
  by_name_{i} = {{ for n in var.names_{i} : n => upper(n) if n != "" }}
  label_{i}   = length(var.names_{i}) > 2 ? "many-${{var.names_{i}[0]}}" : "few"
  script_{i}  = <<-EOT
    #!/bin/sh
    echo "group {i}: ${{join(",", var.names_{i})}}"
    %{{ for n in var.names_{i} ~}}
    echo ${{n}}
    %{{ endfor ~}}
  EOT
}}

data "{p}_thing" "lookup_{i}" {{
  name = "lookup-{i}"
}}

resource "{p}_thing" "item_{i}" {{
  for_each = local.by_name_{i}
  name     = each.value
  tags     = local.tags_{i}
  settings = [for k, v in local.tags_{i} : {{ key = k, value = v }}]
  script   = local.script_{i}

  lifecycle {{
    ignore_changes = [tags["Index"]]
  }}
}}

output "item_{i}_ids" {{
  value = [for r in {p}_thing.item_{i} : r.id]
}}
"""

REQUIRED = """    {p} = {{
      source  = "hashicorp/{p}"
      version = ">= {major}.0"
    }}
"""

PROVIDER = """
provider "{p}" {{
  alias = "group_{i}"
}}
"""


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "variables.tf"), "w") as f:
        f.write('variable "common_tags" {\n  type    = map(string)\n  default = {}\n}\n')
    with open(os.path.join(out, "versions.tf"), "w") as f:
        entries = "".join(REQUIRED.format(p=p, major=1 + i % 4) for i, p in enumerate(PROVIDERS))
        f.write("terraform {\n  required_providers {\n" + entries + "  }\n}\n")
    for i in range(count):
        p = PROVIDERS[i % len(PROVIDERS)]
        text = FILE.format(i=i, p=p)
        if i % 10 == 0:
            text += PROVIDER.format(p=p, i=i)
        with open(os.path.join(out, f"group_{i:04d}.tf"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
