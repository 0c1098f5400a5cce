resource "random_id" "suffix" {
  byte_length = 4
}
