job "cache" {
  group "cache" {
    count     = 2
    rebalance = "yes"
    task "redis" {
      driver = "exec"
      config { command = "/usr/bin/redis-server" }
    }
  }
}
