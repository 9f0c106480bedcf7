job "web" {
  group "api" {
    count = "three"
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
