job "web" {
  spread {
    weight = 200
    target "us-east" {
      percent = 50
    }
    target {
      percent = 50
    }
  }
  spread {
    attribute = "${meta.zone}"
    weight    = 0
  }
  spread {
    attribute = "${meta.zone}"
  }
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
