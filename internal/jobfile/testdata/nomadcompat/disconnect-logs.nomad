# A Nomad job file as teams write them: a region, the disconnect settings
# of several Nomad versions, a logs block and a scaling policy.
job "cache" {
  region      = "global"
  datacenters = ["dc1"]

  group "redis" {
    count                 = 2
    max_client_disconnect = "1h"

    disconnect {
      stop_on_client_after = "30s"
      lost_after           = "1h"
      replace              = false
      reconcile            = "best_score"
    }

    scaling {
      min = 1
      max = 4
      policy {
        cooldown = "2m"
      }
    }

    task "redis" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      logs {
        max_files     = 5
        max_file_size = 15
      }
    }
  }

  group "legacy" {
    stop_after_client_disconnect = "45s"

    task "worker" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
