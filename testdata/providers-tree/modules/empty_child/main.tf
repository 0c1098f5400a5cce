output "name" {
  value = "x"
}
