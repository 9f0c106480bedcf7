# Partial restart, reschedule and update blocks, at job and group level:
# each merged field by field with Nomad's defaults for the job's type.
job "merged" {
  update {
    max_parallel = 2
  }

  reschedule {
    delay = "10s"
  }

  group "web" {
    count = 2

    restart {
      attempts = 5
    }

    reschedule {
      max_delay = "5m"
    }

    update {
      min_healthy_time = "1s"
    }

    task "web" {
      driver = "raw_exec"

      restart {
        delay = "2s"
      }

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
