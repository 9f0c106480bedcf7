job "web" {
  count = 2
  group "api" {
    driver = "exec"
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      task "inner" {}
    }
  }
}
