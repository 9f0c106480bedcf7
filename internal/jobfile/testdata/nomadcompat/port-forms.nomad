# Port forms Nomad takes: a label that is a number (port "8080"), which a
# service's port names as the label, not as port 8080; and to = -1, Nomad's
# way of writing "the same number as the host port". The batch task checks
# the variables each port gives it and exits 0.
job "portforms" {
  type = "batch"

  group "web" {
    network {
      port "8080" {}
      port "admin" {
        to = -1
      }
    }

    service {
      name = "portforms"
      port = "8080"
    }

    task "check" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = ["-c", <<EOT
test -n "$NOMAD_PORT_8080" && test "$NOMAD_PORT_8080" = "$NOMAD_HOST_PORT_8080" &&
test -n "$NOMAD_PORT_admin" && test "$NOMAD_PORT_admin" = "$NOMAD_HOST_PORT_admin"
EOT
        ]
      }
    }
  }
}
