job "web" {
  scorring = "binpack"
  afinity {
    attribute = "${attr.arch}"
    value     = "amd64"
  }
  group "api" {
    netwrok {
      port "http" {}
    }
    sprad {
      attribute = "${meta.zone}"
    }
    task "server" {
      driver = "exec"
      config {
        command  = "/bin/sleep"
        work_dri = "/srv"
        prestrat {
          command = "/bin/true"
        }
      }
      resources {
        dsik = 300
      }
    }
  }
}
