# A service with a health check: two copies of testapp (drover's test
# program, an HTTP server with /health), registered as "hello" and served
# as hello.service.drover while their check passes.
#   go build -o /tmp/drover-testapp ./internal/testapp
#   drover run examples/services.hcl
#   drover status hello-web
job "hello-web" {
  type = "service"

  group "web" {
    count = 2

    network {
      port "http" {}                # dynamic; testapp listens on $DROVER_PORT_http
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/tmp/drover-testapp"
      }

      service {
        name = "hello"
        port = "http"
        tags = ["example"]

        check {
          type     = "http"
          path     = "/health"
          interval = "2s"
          timeout  = "1s"
          grace    = "5s"           # failures in the first 5s leave it pending

          check_restart {
            limit = 3               # three failed probes in a row restart the task
          }
        }
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
