job "team/web" {
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
