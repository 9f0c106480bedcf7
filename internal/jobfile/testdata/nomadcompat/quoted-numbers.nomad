# Numbers and bools written as strings, which Nomad converts.
job "quoted" {
  priority = "60"

  group "web" {
    count = "2"

    restart {
      attempts = "3"
      delay    = "5s"
    }

    task "web" {
      driver       = "raw_exec"
      kill_timeout = "3s"
      leader       = "true"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      resources {
        cpu    = "50"
        memory = "32"
      }
    }
  }
}
