# Containers and services: a docker task with every docker config key, an
# exec task in the same group registering the same service, and checks of
# each type, most fields left to their defaults.
job "shop" {
  group "web" {
    network {
      port "http" {
        to = 8080
      }
      port "admin" {
        static = 9000
      }
    }

    task "app" {
      driver = "docker"
      config {
        image        = "drover-testapp:1"
        entrypoint   = ["/testapp"]
        command      = "/testapp"
        args         = ["-listen", ":8080"]
        ports        = ["http"]
        labels       = { team = "a" }
        privileged   = false
        network_mode = "bridge"
        pid_mode     = ""
        volumes      = ["/srv/data:/data:ro"]
      }

      service {
        name = "web"
        port = "http"
        tags = ["v1", "primary"]
        check {
          type     = "http"
          path     = "/health"
          interval = "5s"
          timeout  = "1s"
          grace    = "10s"
          check_restart {
            limit = 3
            grace = "30s"
          }
        }
        check {
          type     = "tcp"
          interval = "10s"
        }
        check {
          type    = "script"
          command = "/bin/check"
          args    = ["-q"]
        }
      }
    }

    task "admin" {
      driver = "raw_exec"
      config {
        command = "/usr/local/bin/admin"
      }

      service {
        name = "web"
        port = "admin"
        check {
          type = "http"
          check_restart {
            limit = 2
          }
        }
        check {
          name     = "deep"
          type     = "http"
          port     = "http"
          interval = "1s"
        }
        check {
          type  = "http"
          grace = "5s"
          check_restart {
            limit = 1
          }
        }
      }

      service {
        name = "admin"
      }
    }
  }
}
