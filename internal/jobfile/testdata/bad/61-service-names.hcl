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
        name = "Web_API"
        port = "http"
      }
      service {
        name = "api"
        port = "https"
        tags = ["v1", ""]
      }
      service {
        name = "api"
      }
      service {
        port = "http"
      }
    }
  }
}
