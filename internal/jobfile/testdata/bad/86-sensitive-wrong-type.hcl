variable "password" {
  type      = string
  default   = "hunter2"
  sensitive = true
}

job "web" {
  group "api" {
    count = var.password
    task "server" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
