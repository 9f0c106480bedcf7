job "web" {
  datacenters = ["dc1"]

  group "api" {
    service {
      name = "web"
    }

    task "server" {
      driver = "exec"

      config {
        command = "/usr/bin/server"
      }

      template {
        data        = "port = 8080"
        destination = "/etc/server.conf"
      }
    }
  }
}
