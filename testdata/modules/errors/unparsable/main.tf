resource "aws_instance" "web" {
  ami           = "ami-0123456789abcdef0"
  instance_type = "t3.micro"
  user_data     = <<EOT
#!/bin/sh
echo hello
EOT
  tags = {
    Name = "web"
