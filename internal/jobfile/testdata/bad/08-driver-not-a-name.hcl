job "web" {
  group "api" {
    task "server" {
      driver = "my own driver"
      config {
        command = "/bin/true"
      }
    }
  }
}
