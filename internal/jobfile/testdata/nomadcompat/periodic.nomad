# A periodic batch job: a cron schedule in a time zone, no overlap.
job "nightly" {
  type = "batch"

  periodic {
    crons            = ["0 3 * * *"]
    prohibit_overlap = true
    time_zone        = "Europe/Paris"
  }

  group "report" {
    task "report" {
      driver = "raw_exec"

      config {
        command = "/bin/date"
      }
    }
  }
}
