job "web" {
  service {
    name = "web"
  }
  group "api" {
    service {
      name = "api"
    }
    network {
      port "http" {
        to     = "8080"
        static = 8080
      }
    }
    task "server" {
      driver = "docker"
      check {
        type = "tcp"
      }
      config {
        image = "api:1"
        ports = ["http"]
      }
      service "api" {
        provider = "nomad"
        port     = "http"
        check_restart {
          limit = 3
        }
        check {
          type = "tcp"
          check_restart "x" {
            limit = "3"
          }
        }
      }
    }
  }
}
