# A Nomad-style job fetching its program and its configuration with
# artifact blocks: an archive unpacked into local/, a checksum verified,
# a file kept whole, a header sent, a file on the node.
job "artifact-demo" {
  datacenters = ["dc1"]
  type        = "service"

  meta {
    release = "2.3.1"
  }

  group "app" {
    network {
      port "http" {}
    }

    task "server" {
      driver = "exec"

      artifact {
        source      = "https://downloads.example.com/app/${NOMAD_META_release}/app_linux_${attr.cpu.arch}.tar.gz"
        destination = "local/app"
        options {
          checksum = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        }
      }

      artifact {
        source      = "https://downloads.example.com/app/seed.tar.gz"
        destination = "local/seed"
        mode        = "dir"
        options {
          archive = false
        }
        headers {
          User-Agent = "artifact-demo"
        }
      }

      artifact {
        source      = "file:///etc/hostname"
        mode        = "file"
        destination = "${NOMAD_TASK_DIR}/hostname"
        chown       = true
      }

      config {
        command = "local/app/bin/server"
        args    = ["-port", "${NOMAD_PORT_http}"]
      }
    }
  }
}
