job "web" {
  group "my api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
