job "web" {
  group "api" {
    count = 1
    count = 2
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      resources { cpu = 100 }
      resources { memory = 64 }
    }
  }
}
