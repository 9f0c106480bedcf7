job "web" {
  datacenters = ["dc1"]

  group "api" {
    network {
      port "http" {}
    }

    task "server" {
      driver = "exec"

      config {
        command = "/usr/bin/server"
      }

      template {
        data        = "port = 8080"
        destination = "local/server.conf"
      }
    }
  }
}
