job "web" {
  priority = 200
  type     = "system"
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
