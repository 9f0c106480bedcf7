job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/sleep" }
    }
  }
}
