job "web" {
  group "api" {
    count = -2
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
