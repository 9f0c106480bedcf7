job "web" {
  constraint {
    attribute = "${node.name}"
    operator  = "colocate"
    value     = "cache"
  }
  constraint {
    operator = "conflicts"
    value    = "batch-["
  }
  group "api" {
    constraint {
      operator = "replaces"
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
