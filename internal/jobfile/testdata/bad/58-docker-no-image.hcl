job "cache" {
  group "cache" {
    task "redis" {
      driver = "docker"
      config {
        args = ["--appendonly", "yes"]
        prestart {
          command = "/bin/mkdir"
        }
        stop {
          command = "/usr/bin/redis-cli"
        }
      }
    }
  }
}
