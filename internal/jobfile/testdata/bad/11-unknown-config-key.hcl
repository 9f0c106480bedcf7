job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config {
        comand   = "/bin/sleep"
        args     = ["60"]
        pid_mode = "host"
      }
    }
  }
}
