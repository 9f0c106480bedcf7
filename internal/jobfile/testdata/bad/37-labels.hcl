job "web" "extra" {
  group {
    restart "policy" {
      attempts = 1
      interval = "1m"
    }
    task "a" "b" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
