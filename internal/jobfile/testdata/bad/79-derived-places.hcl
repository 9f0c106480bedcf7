job "web" {
  group "api" {
    name = "api"
    meta { team = "a" }
    task "server" {
      driver  = "exec"
      command = "/bin/sleep"
      config {
        command = "/bin/sleep"
        prestart { comand = "/bin/true" }
      }
      resources {
        meta  = { a = "b" }
        type  = "http"
        port  = "http"
        grace = "5s"
      }
      service {
        name = "web"
        check {
          name = "alive"
          type = "tcp"
          port "http" {}
          check_restart { limitt = 3 }
        }
      }
    }
  }
}
