resource "broken" {
