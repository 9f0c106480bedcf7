job "web" {
  update {
    max_paralel = 2
    stagger     = "30s"
    canary      = "one"
    auto_revert = "yes"
  }
  group "api" {
    count            = 3
    min_healthy_time = "10s"
    update {
      healthy_deadlin = "1m"
      auto_promte     = true
    }
    updates {
      canary = 1
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
