job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      resources {
        cpu    = 1.5
        memory = "128"
      }
    }
  }
}
