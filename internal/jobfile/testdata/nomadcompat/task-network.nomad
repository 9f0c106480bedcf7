# Nomad's older form: the network, with its ports and mbits, written in
# the task's resources block. The task checks that its port is given.
job "oldnet" {
  group "web" {
    task "web" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "test -n \"$NOMAD_PORT_http\" && test \"$NOMAD_PORT_http\" = \"${NOMAD_HOST_PORT_http}\" && exec sleep 3600"]
      }

      resources {
        cpu    = 100
        memory = 64

        network {
          mbits = 10
          port "http" {}
        }
      }

      service {
        name = "oldnet"
        port = "http"
      }
    }
  }
}
