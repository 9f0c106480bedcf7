job "web" {
  group "api" {
    count = 3
    # Distinct placement is a hard rule, not a preference.
    affinity {
      operator = "distinct_hosts"
    }
    affinity {
      operator = "colocate"
      value    = "cache"
    }
    affinity {
      value = "amd64"
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
