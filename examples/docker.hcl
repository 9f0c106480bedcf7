# A service in a container: two copies of drover's test program (an HTTP
# server) from a local image, each reached on a host port mapped to the
# container's port 8080. No registry is needed, but the image must be on
# the node first (drover does not build images):
#   mkdir -p /tmp/testapp-ctx
#   CGO_ENABLED=0 go build -o /tmp/testapp-ctx/testapp ./internal/testapp
#   printf 'FROM scratch\nCOPY testapp /testapp\nENTRYPOINT ["/testapp"]\n' >/tmp/testapp-ctx/Dockerfile
#   docker build -t drover-testapp:latest /tmp/testapp-ctx
#   drover run examples/docker.hcl
#   drover status hello-docker
job "hello-docker" {
  type = "service"

  group "web" {
    count = 2

    network {
      port "http" {
        to = 8080                   # the container's port; the host's is picked
      }
    }

    task "server" {
      driver = "docker"

      config {
        image = "drover-testapp:latest"
        ports = ["http"]
        labels = {
          team = "example"
        }
      }

      service {
        name = "hello-docker"
        port = "http"

        check {
          type     = "http"
          path     = "/health"
          interval = "2s"
          timeout  = "1s"
        }
      }

      resources {
        cpu    = 100
        memory = 64                 # the container's memory limit, swap included
      }
    }
  }
}
