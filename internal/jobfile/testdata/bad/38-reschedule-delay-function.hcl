job "web" {
  group "api" {
    reschedule {
      attempts       = 3
      delay          = "10s"
      delay_function = "fibonacci"
      max_delay      = "5s"
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
