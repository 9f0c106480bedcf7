job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config {
        comand   = "/bin/sleep"
        args     = ["60"]
        image    = "redis:7"
      }
    }
  }
}
