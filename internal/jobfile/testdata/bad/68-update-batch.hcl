job "report" {
  type = "batch"
  update {
    max_parallel = 2
  }
  group "report" {
    update {
      canary = 1
    }
    task "report" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
