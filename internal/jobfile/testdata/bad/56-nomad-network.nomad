# Nomad features around ports and disk that drover does without.
job "web" {
  datacenters = ["dc1"]
  group "api" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }
    ephemeral_disk {
      size = 300
    }
    spread {
      attribute = "${meta.zone}"
      target "a" "b" {
        percent = 50
      }
    }
    task "server" {
      driver = "exec"
      user   = "nobody"
      config {
        command = "/bin/sleep"
      }
      spread {
        attribute = "${meta.rack}"
      }
    }
  }
}
