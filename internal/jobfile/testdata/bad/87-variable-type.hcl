variable "count" {
  type    = number
  default = "many"
}

variable "wrong" {
  type = strang
}

variable "inside" {
  default = var.count
  color   = "blue"
}

job "web" {
  variable "late" {}
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
