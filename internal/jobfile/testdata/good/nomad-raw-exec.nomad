# A job file as Nomad users write them, for the raw_exec driver.
job "cleanup" {
  datacenters = ["dc1"]
  type        = "batch"

  meta = {
    team    = "ops"
    version = 3
  }

  group "cleanup" {
    count = 1

    task "tmpwatch" {
      driver = "raw_exec"

      config {
        command = "/usr/bin/find"
        args    = ["/tmp", "-mtime", "+7", "-delete"]
      }

      env = {
        "LANG" = "C"
        DEBUG  = true
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
