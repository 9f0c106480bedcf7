variable "replicas" {
  type    = number
  default = 20
  validation {
    condition     = var.replicas <= 10
    error_message = "replicas must be at most 10."
  }
}

job "web" {
  group "api" {
    count = var.replicas
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
