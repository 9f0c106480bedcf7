job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
