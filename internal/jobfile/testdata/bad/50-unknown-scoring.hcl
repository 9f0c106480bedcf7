job "web" {
  scoring = "least-loaded"
  preempt = "yes"
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
