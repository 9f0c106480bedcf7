job "web" {
  group "api" {
    network {
      port "my-port" {}
      port "8080" {}
      port {
        static = 9000
      }
      port "a" "b" {}
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
