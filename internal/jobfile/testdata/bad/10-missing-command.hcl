job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config {
        args = ["--port", "8080"]
      }
    }
    task "worker" {
      driver = "raw_exec"
    }
  }
}
