# A rolling deployment: three copies of testapp (drover's test program, an
# HTTP server with /health) replaced one at a time when the job changes,
# each new copy healthy for 2s before the next is replaced.
#   go build -o /tmp/drover-testapp ./internal/testapp
#   drover run examples/deploy.hcl
#   (change VERSION below, then run it again)
#   drover status deploy-web
job "deploy-web" {
  type = "service"

  update {
    max_parallel     = 1            # replace one copy at a time
    min_healthy_time = "2s"         # a new copy's check must pass this long...
    healthy_deadline = "20s"        # ...within 20s of its start, or it is unhealthy
    auto_revert      = true         # a failed deployment goes back to the last good version
  }

  group "web" {
    count = 3

    network {
      port "http" {}                # dynamic; testapp listens on $DROVER_PORT_http
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/tmp/drover-testapp"
      }

      env {
        VERSION = "1"               # any change here makes a new version
      }

      service {
        name = "deploy-web"
        port = "http"

        check {
          type     = "http"
          path     = "/health"
          interval = "1s"
          timeout  = "1s"
        }
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
