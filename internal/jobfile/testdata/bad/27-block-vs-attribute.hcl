job "web" {
  group = {
    name = "api"
  }
  group "api" {
    task "server" {
      driver {
        name = "exec"
      }
      config = {
        command = "/bin/sleep"
      }
    }
  }
}
