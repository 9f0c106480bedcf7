job "web" {
  group "api" {
    network {
      port "http" {}
    }
    task "server" {
      driver = "exec"
      config {
        command = "/usr/local/bin/api"
      }
      service {
        name = "api"
        check {
          type = "grpc"
        }
        check {
          type = "http"
          path = "health"
          interval = "50ms"
        }
        check {
          type     = "tcp"
          port     = "metrics"
          interval = "1s"
          timeout  = "5s"
          path     = "/"
        }
        check {
          type = "script"
          args = ["-q"]
          check_restart {
            limit = 0
          }
        }
        check {
          name = "same"
          type = "http"
          method = "POST"
          intervall = "5s"
        }
      }
      service {
        name = "admin"
        port = "http"
        check {
          name    = "same"
          type    = "tcp"
          command = "/bin/true"
        }
        check {}
      }
    }
  }
}
