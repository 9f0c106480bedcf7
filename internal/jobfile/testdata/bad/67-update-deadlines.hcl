job "web" {
  update {
    min_healthy_time = "30s"
    healthy_deadline = "30s"
  }
  group "api" {
    update {
      healthy_deadline  = "10m"
      progress_deadline = "5m"
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
  group "worker" {
    update {
      min_healthy_time = "-5s"
    }
    task "worker" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
