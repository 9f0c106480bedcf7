job "placed" {
  constraint {
    attribute = "${attr.os}"
    value     = "linux"
  }
  constraint {
    attribute = "${attr.kernel}"
    operator  = "version"
    value     = ">= 5.10, < 7"
  }

  group "api" {
    count = 3
    constraint {
      attribute = "${meta.rack}"
      operator  = "set_contains_any"
      value     = "r1,r2"
    }
    constraint {
      operator = "distinct_hosts"
    }
    constraint {
      attribute = "${meta.zone}"
      operator  = "distinct_property"
      value     = 2
    }

    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      constraint {
        attribute = "${attr.cpu.count}"
        operator  = ">="
        value     = "4"
      }
      constraint {
        attribute = "${node.name}"
        operator  = "regexp"
        value     = "^web-"
      }
      constraint {
        attribute = "$${meta.gpu}"
        operator  = "is_not_set"
      }
    }
  }
}
