variable "image" {
  type = string
}

job "web" {
  group "api" {
    task "server" {
      driver = "docker"
      config { image = var.image }
    }
  }
}
