job "web" {
  constraint {
    attribute = "${attr.os}"
    operator  = "~="
    value     = "linux"
  }
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
