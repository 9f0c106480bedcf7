# A batch job bounded in time: its agent stops the instance once it has run
# for max_run_duration, and the instance is complete, not failed. The task
# works until it is asked to stop, then exits 0.
job "bounded" {
  type = "batch"

  group "crawl" {
    max_run_duration = "3s"

    restart {
      attempts = 0
      mode     = "fail"
    }

    task "crawl" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'exit 0' TERM; while :; do sleep 0.2; done"]
      }
    }
  }
}
