# An artifact from the node's own file system, fetched into the task's
# directory before the task starts.
job "fetch" {
  type = "batch"

  group "fetch" {
    task "show" {
      driver = "raw_exec"

      artifact {
        source      = "file:///etc/hostname"
        destination = "local/hostname"
        mode        = "file"
      }

      config {
        command = "/bin/cat"
        args    = ["local/hostname"]
      }
    }
  }
}
