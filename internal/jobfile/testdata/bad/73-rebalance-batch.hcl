job "reports" {
  type = "batch"
  group "report" {
    rebalance = true
    task "report" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
