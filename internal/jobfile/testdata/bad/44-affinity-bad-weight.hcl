job "web" {
  affinity {
    attribute = "${attr.arch}"
    value     = "amd64"
    weight    = 150
  }
  affinity {
    attribute = "${meta.rack}"
    value     = "r1"
    weight    = 0
  }
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      affinity {
        attribute = "${attr.kernel}"
        value     = "6.1"
        weight    = "high"
      }
    }
  }
}
