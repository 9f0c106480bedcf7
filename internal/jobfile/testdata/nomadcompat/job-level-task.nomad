# Nomad's older form: tasks written directly in the job, each in a group
# of its own named after it.
job "direct" {
  type = "batch"

  task "first" {
    driver = "raw_exec"

    config {
      command = "/bin/sh"
      args    = ["-c", "test \"$NOMAD_GROUP_NAME\" = first"]
    }
  }

  task "second" {
    driver = "raw_exec"

    config {
      command = "/bin/sh"
      args    = ["-c", "test \"$NOMAD_GROUP_NAME\" = second"]
    }
  }
}
