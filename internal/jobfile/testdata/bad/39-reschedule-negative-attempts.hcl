job "web" {
  type = "batch"

  # The job's policy is every group's default: one mistake, reported once.
  reschedule {
    attempts  = -1
    unlimited = "yes"
  }

  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }

  group "worker" {
    reschedule {
      delay = "1m"
      mode  = "fail"
    }
    task "work" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
