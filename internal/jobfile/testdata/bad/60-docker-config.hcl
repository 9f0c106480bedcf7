job "web" {
  group "api" {
    network {
      port "http" {
        to = 70000
      }
    }
    task "server" {
      driver = "docker"
      config {
        image        = "nginx:1"
        ports        = ["http", "https", "http"]
        labels       = { "drover.alloc" = "x", team = "a" }
        network_mode = "container:db"
        pid_mode     = "private"
        volumes      = ["data:/data", "/srv:/srv:rx", "/srv", "/a:b"]
        privileged   = "yes"
      }
    }
  }
}
