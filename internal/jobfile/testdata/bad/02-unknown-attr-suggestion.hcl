job "web" {
  group "api" {
    task "server" {
      drivr = "exec"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
      resorces {
        cpu = 100
      }
      colour = "blue"
    }
  }
}
