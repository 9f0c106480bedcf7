job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      kill_timeout = "10 seconds"
      restart {
        attempts = 3
        interval = 30
        delay    = "-5s"
      }
    }
  }
}
