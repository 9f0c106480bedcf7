# memory_max = -1: no hard memory limit (Nomad's memory oversubscription).
# The task reserves 32 MB, which is its soft limit, and holds 96 MB in
# one shell variable: with a 32 MB hard limit the kernel would kill it;
# without one it completes. ($$ is a $ for the shell.)
job "oversubscribed" {
  type = "batch"

  group "burst" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "burst" {
      driver = "exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "x=$(head -c 100663296 /dev/zero | tr '\\0' a); test $${#x} -eq 100663296 && echo held $${#x} bytes"]
      }

      resources {
        cpu        = 100
        memory     = 32
        memory_max = -1
      }
    }
  }
}
