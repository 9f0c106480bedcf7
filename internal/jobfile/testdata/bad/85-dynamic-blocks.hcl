variable "checks" {
  default = ["/health", "/ready"]
}

job "web" {
  group "api" {
    dynamic "templat" {
      for_each = ["a"]
      content { data = "x" }
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      dynamic "service" {
        for_each = var.checks
        content {
          name    = "web-${service.key}"
          pathh   = service.value
        }
      }
      dynamic "constraint" {
        for_each = 3
        content { attribute = "x" }
      }
    }
  }
}
