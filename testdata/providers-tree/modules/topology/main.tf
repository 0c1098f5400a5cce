variable "zones" {
  type = list(string)
}

output "pairs" {
  value = { for zone in var.zones : zone => upper(zone) }
}
