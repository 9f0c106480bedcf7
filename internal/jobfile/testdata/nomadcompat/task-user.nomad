# A task run as another user of the node (Nomad's task-level user).
job "asuser" {
  type = "batch"

  group "run" {
    task "whoami" {
      driver = "raw_exec"
      user   = "nobody"

      config {
        command = "/usr/bin/id"
        args    = ["-un"]
      }
    }
  }
}
