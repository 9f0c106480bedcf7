job "web" {
  group "api" {
    network {
      port "http" {}
    }
    task "server" {
      driver = "exec"
      config {
        image      = "nginx:1"
        command    = "/usr/sbin/nginx"
        ports      = ["http"]
        privileged = false
        labels {
          team = "a"
        }
      }
    }
    task "helper" {
      driver = "raw_exec"
      config {
        volumes = ["/srv:/srv"]
      }
    }
  }
}
