# Bridge networking: a namespace of the instance's own, its port
# forwarded from the node; and one with no network but loopback.
job "bridged" {
  group "web" {
    network {
      mode = "bridge"

      port "http" {
        to = 8080
      }
    }

    task "web" {
      driver = "exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }

  group "isolated" {
    network {
      mode = "none"
    }

    task "offline" {
      driver = "exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
