# A batch job: two copies each print a line and exit 0, which completes them.
#   drover run examples/batch.hcl
job "report" {
  type = "batch"

  group "report" {
    count = 2

    task "report" {
      driver = "exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"report from $DROVER_ALLOC_NAME: all good\""]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
