job "web" {
  update {
    max_parallel = -1
    health_check = "http"
    canary       = 2
  }
  group "api" {
    count = 2
    update {
      canary = 3
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
  # Inherits canary = 2 from the job.
  group "solo" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
