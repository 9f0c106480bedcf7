job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        user    = 1000
        prestart "mkdir" {
          command = "/bin/mkdir"
          args    = ["-p", 7]
        }
        stop {
          command = "/bin/kill"
          signal  = "TERM"
        }
        stop {
          command = "/bin/true"
        }
        prestart = "/bin/true"
      }
    }
  }
}
