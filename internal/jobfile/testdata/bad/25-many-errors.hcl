job "web" {
  type     = "batch"
  priority = 0.5

  group "api" {
    count = 20000
    update {
      max_parallel = 1
    }

    task "server" {
      driver  = "exec"
      comand  = "/bin/server"
      env {
        PORT = 8080
      }
      resources {
        cpu    = 100
        memory = -1
      }
    }
  }
}
