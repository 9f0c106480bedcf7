job "web" {
  group "api" {
    task "server" {
      driver = "raw exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
