variable "ports" {
  type = map(number)
}
job "u" {
  group "g" {
    network {
      dynamic "port" {
        for_each = var.ports
        labels   = [port.key]
        content { to = port.value }
      }
    }
    dynamic "task" {
      for_each = var.ports
      labels = ["t"]
      content {
        driver = "exec"
        config { command = "/bin/true" }
      }
    }
  }
}
