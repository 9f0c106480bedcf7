# A sysbatch job: once on every eligible node, each to completion.
job "inventory" {
  type = "sysbatch"

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  group "inventory" {
    task "uname" {
      driver = "raw_exec"

      config {
        command = "/bin/uname"
        args    = ["-a"]
      }
    }
  }
}
