job "web" {
  group "api" {
    constraint {
      attribute = "${meta.rack}"
      operator  = "set_contains_any"
      value     = "r1,r2"
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      constraint {
        attribute = "${attr.kernel}"
        operator  = "regexp"
        value     = "^6\\.(1"
      }
    }
  }
}
