# A service group the leader may move when the nodes' load is uneven (a
# node joined, or others filled up), one batch at a time under its update
# block. The same job as rebalance.json and rebalance.yaml.
job "cache" {
  group "cache" {
    count     = 4
    rebalance = true
    update {
      max_parallel = 1
    }
    task "redis" {
      driver = "exec"
      config { command = "/usr/bin/redis-server" }
    }
  }

  # Off by default.
  group "pinned" {
    task "sidecar" {
      driver = "exec"
      config { command = "/usr/local/bin/sidecar" }
    }
  }
}
