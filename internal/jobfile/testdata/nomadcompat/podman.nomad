# A task on a driver drover does not have: valid, never placed.
job "cache" {
  datacenters = ["dc1"]

  group "cache" {
    network {
      port "db" {
        to = 6379
      }
    }

    task "redis" {
      driver = "podman"

      config {
        image = "docker.io/library/redis:7"
        ports = ["db"]
        socket_path = "unix:///run/podman/podman.sock"
      }

      resources {
        cpu    = 200
        memory = 128
      }
    }
  }
}
