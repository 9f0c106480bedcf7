# A periodic batch job whose day of week is written 7 for Sunday, in a
# range and alone, as Nomad's cron reads it.
job "weekend" {
  type = "batch"

  periodic {
    crons            = ["30 6 * * 6-7", "0 23 * * 7"]
    prohibit_overlap = true
  }

  group "sweep" {
    task "sweep" {
      driver = "raw_exec"

      config {
        command = "/bin/date"
      }
    }
  }
}
