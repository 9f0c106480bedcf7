job "web" {
  group "api" {
    count = 4
    constraint {
      operator = "distinct_hosts"
    }
    constraint {
      attribute = "${meta.rack}"
      operator  = "distinct_property"
      value     = "two"
    }
    constraint {
      operator = "distinct_property"
      value    = 2
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
