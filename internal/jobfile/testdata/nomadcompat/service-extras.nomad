# A service registered with Nomad's own provider, canary tags, and checks
# that say how they count during an update: accepted, each a warning.
job "api" {
  group "api" {
    count = 2

    network {
      port "http" {}
    }

    update {
      canary       = 1
      max_parallel = 1
    }

    service {
      name        = "api"
      provider    = "nomad"
      port        = "http"
      tags        = ["v1"]
      canary_tags = ["canary"]
      on_update   = "require_healthy"

      check {
        type      = "script"
        task      = "api"
        command   = "/bin/true"
        interval  = "5s"
        timeout   = "2s"
        on_update = "ignore_warnings"
      }
    }

    task "api" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
