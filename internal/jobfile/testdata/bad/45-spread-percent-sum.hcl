job "web" {
  group "api" {
    count = 10
    spread {
      attribute = "${meta.zone}"
      target "us-east" {
        percent = 70
      }
      target "us-west" {
        percent = 50
      }
      target "us-east" {
        percent = 0
      }
    }
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
    }
  }
}
