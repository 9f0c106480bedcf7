job "web" {
  group "api" {
    network {
      port "http" {
        static = 80800
      }
      port "admin" {
        static = -1
      }
      port "db" {
        static = "5432"
      }
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
