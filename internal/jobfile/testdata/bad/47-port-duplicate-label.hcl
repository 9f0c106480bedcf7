job "web" {
  group "api" {
    network {
      port "http" {
        static = 8080
      }
      port "http" {}
      port "admin" {
        static = 8080
      }
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
