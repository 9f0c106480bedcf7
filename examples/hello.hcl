# A service: three copies of a task that greets every two seconds.
#   drover run examples/hello.hcl
#   drover status hello
job "hello" {
  type = "service"

  group "hello" {
    count = 3

    task "greeter" {
      driver = "exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do echo \"hello from $DROVER_ALLOC_NAME\"; sleep 2; done"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
