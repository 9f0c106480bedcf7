# Lifecycle hooks: a prestart task that prepares, a poststart sidecar, a
# poststop task that cleans up; the main task checks the order.
job "hooks" {
  type = "batch"

  group "job" {
    task "prepare" {
      lifecycle {
        hook = "prestart"
      }

      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "touch ${NOMAD_ALLOC_DIR}/prepared"]
      }
    }

    task "watch" {
      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }

    task "main" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "test -f ${NOMAD_ALLOC_DIR}/prepared && sleep 1"]
      }
    }

    task "cleanup" {
      lifecycle {
        hook = "poststop"
      }

      driver = "raw_exec"

      config {
        command = "/bin/rm"
        args    = ["-f", "${NOMAD_ALLOC_DIR}/prepared"]
      }
    }
  }
}
