# The same job as web.json and web.yaml.
job "web" {
  type        = "service"
  priority    = 60
  datacenters = ["dc1", "dc2"]

  meta {
    owner = "team-a"
  }

  reschedule {
    delay     = "10s"
    max_delay = "10m"
  }

  group "api" {
    count = 3

    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "delay"
    }

    reschedule {
      attempts       = 3
      interval       = "1h"
      delay_function = "constant"
    }

    task "server" {
      driver = "exec"

      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }

      env {
        PORT = "8080"
        MODE = "prod"
      }

      resources {
        cpu    = 200
        memory = 128
      }

      kill_timeout = "10s"
    }

    task "sidecar" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      restart {
        attempts = 0
        mode     = "fail"
      }

      meta = {
        "role.kind" = "helper"
      }
    }
  }
}
