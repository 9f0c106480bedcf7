job "web" {
  group "api" {
    restart {
      attempts = 2
      interval = "5m"
      mode     = "retry"
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
    task "helper" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
