job "tiny" {
  group "g" {
    task "t" {
      driver = "exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
