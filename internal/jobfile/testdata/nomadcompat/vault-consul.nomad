# Vault, Consul, workload identity and CSI: accepted, each a warning.
job "billing" {
  vault {
    policies = ["billing"]
  }

  group "api" {
    consul {
      namespace = "billing"
    }

    volume "ledger" {
      type            = "csi"
      source          = "ledger-db"
      attachment_mode = "file-system"
      access_mode     = "single-node-writer"
    }

    network {
      port "http" {}
    }

    service {
      name = "billing-api"
      port = "http"

      connect {
        sidecar_service {}
      }
    }

    task "api" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      identity {
        env  = true
        file = true
      }

      volume_mount {
        volume      = "ledger"
        destination = "/srv/ledger"
      }
    }
  }
}
