# A cache whose data outlives its instances: a host volume the nodes
# declare (drover agent --host-volume cache-data=/srv/cache), mounted
# read-write by the server and read-only by a sidecar that reports on it.
job "cache" {
  datacenters = ["dc1"]

  group "cache" {
    count = 1

    volume "data" {
      type            = "host"
      source          = "cache-data"
      read_only       = false
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      per_alloc       = true
    }

    volume "tls" {
      type      = "host"
      source    = "certs"
      read_only = true
    }

    task "server" {
      driver = "docker"

      config {
        image = "redis:7"
        args  = ["--dir", "/data"]
      }

      volume_mount {
        volume           = "data"
        destination      = "/data"
        propagation_mode = "private"
      }

      volume_mount {
        volume      = "tls"
        destination = "/etc/tls"
        read_only   = true
      }

      resources {
        cpu    = 200
        memory = 256
      }
    }

    task "report" {
      driver = "raw_exec"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "while sleep 60; do du -s ${NOMAD_TASK_DIR}/data; done"]
      }

      volume_mount {
        volume      = "data"
        destination = "${NOMAD_TASK_DIR}/data"
        read_only   = true
      }
    }
  }
}
