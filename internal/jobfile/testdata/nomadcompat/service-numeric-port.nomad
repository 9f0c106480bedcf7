# Group services whose port is written as a number, as Nomad allows: the
# instance is registered at that port, with no port in the group's network.
job "numeric-port" {
  group "g" {
    service {
      name = "numeric-port-a"
      port = "9001"

      check {
        name     = "alive"
        type     = "script"
        task     = "app"
        command  = "/bin/sh"
        args     = ["-c", "true"]
        interval = "2s"
        timeout  = "1s"
      }
    }

    task "app" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }

      service {
        name = "numeric-port-b"
        port = "9002"
      }
    }
  }
}
