job "web" {
  group "api" {
    count = 3 4
    task "server" {
      driver = "exec"
    }
  }
