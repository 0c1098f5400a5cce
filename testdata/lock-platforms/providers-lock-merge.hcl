# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/hashicorp/null" {
  version     = "3.2.3"
  constraints = "~> 3.2"
  hashes = [
    "h1:TDDuv2HL3ahwq4mly0a4wqag7yjkcwvyDaL4hcuxfxM=",
    "h1:XaZJkLtAA4U1ZEstIzgCwvZ5XyeWxbZjiYdnA4uOFDg=",
    "h1:c3RhbGUgaGFzaCBmcm9tIGFub3RoZXIgYnVpbGQgb2YgdGhlIHBhY2thZ2U=",
    "h1:i8SaVe43TFXRWX227cB9jqnNFXZfbSTkRAusHnqxkBQ=",
    "h1:jXhes6KRYsamxnBBEWW403qNxCwHTc6VF7Hx+9h3Xgs=",
    "h1:tb+mnvmPUSxntrl4VW+PEh2UU0w87YweEHIpVHFZfo0=",
    "zh:394b03de52e63694fadc708c78618f0f9e7fc69af970d22e8d55dc7e994e550e",
    "zh:6e4b0a626147a7667a065ab5e441ea469f2fce21966f7f1611a792dd0a20a88e",
    "zh:acd7bda966e07ded7252e18b9e7b1c8c9ac74f41a6b0af976bec9c471de99fc1",
    "zh:ba09cd2c308a4abd3cedd5e96b944b2953887c4eae340abd021bab3a4ee3be72",
    "zh:c76d15846b539d97f638461f3071d558cabe84bf9250f905ee2880c40ef0f947",
  ]
}

provider "registry.terraform.io/hashicorp/random" {
  version = "3.6.3"
  hashes = [
    "h1:2Sr4hOpwRKTulTMTaot7BW+4o8Yn4T/A06Ln2xTnIN8=",
    "h1:6ZA3SDRqrhhC91lW4FF+kns7QDy8lH3kNRAw7PzXPDE=",
    "h1:R9er29mqA5dxqdIxzY/wo+Jb3tNxS2jjCDS0t5mKTvI=",
    "h1:bROFb9SB2yS05fC0HOHWCaJVZ9lZ7Ge1x/26kinSJsI=",
    "h1:izxDJArTs+W1V/LfjmhnEiaZYgbNY1pdKv6yUWxgVuo=",
    "zh:4e0aa4fd8d53b414695e80999f580ce07b8e43860a04dd3e98f69f1562346c05",
    "zh:934d609f1eedb48e7345b9f6cdf8c21e0b3cc7885fe90de12b23638e6806704a",
    "zh:a03676d10d0625f3efdcb94385f5ca5c26a218326f18d302f56e5f8561b271b8",
    "zh:b957b50517d1eef0bedac6dd8c4674a497d9e0c9db88d03dd8abbdf3ed4aea11",
    "zh:b9619f7e0c2c787fbd928049b0b9f97a7519e5ccc206c03220a30e771bca88cb",
  ]
}
