job "burst" {
  group "g" {
    task "t" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
      resources {
        memory     = 64
        memory_max = -2
      }
    }
  }
}
