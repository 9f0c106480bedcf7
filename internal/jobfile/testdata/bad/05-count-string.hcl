job "web" {
  group "api" {
    count = "3"
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
