# Services at group level, a script check naming its task.
job "web" {
  group "web" {
    count = 2

    network {
      port "http" {}
    }

    service {
      name = "web"
      port = "http"
      tags = ["frontend"]

      check {
        type     = "script"
        task     = "server"
        command  = "/bin/sh"
        args     = ["-c", "true"]
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
