# Host networking with a dynamic and a static port, each mapped "to" the
# port the program listens on, and a TCP check on the dynamic one.
job "ports" {
  group "web" {
    network {
      mode = "host"

      port "http" {
        to = 8080
      }

      port "admin" {
        static = 24917
      }
    }

    service {
      name = "ports-web"
      port = "http"

      check {
        type     = "script"
        task     = "web"
        command  = "/bin/sh"
        args     = ["-c", "test -n \"$NOMAD_PORT_http\" && test \"$NOMAD_HOST_PORT_admin\" = 24917"]
        interval = "2s"
        timeout  = "1s"
      }
    }

    task "web" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
