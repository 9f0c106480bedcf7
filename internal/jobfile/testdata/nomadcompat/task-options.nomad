# The task and group options Nomad users set: kill signal and delay, a
# leader, a hard memory limit, an ephemeral disk, disconnect, migrate
# and scaling.
job "options" {
  group "app" {
    count = 1

    ephemeral_disk {
      size    = 200
      sticky  = true
      migrate = true
    }

    disconnect {
      stop_on_client_after = "1m"
    }

    migrate {
      max_parallel     = 1
      health_check     = "task_states"
      min_healthy_time = "5s"
      healthy_deadline = "2m"
    }

    scaling {
      enabled = true
      min     = 1
      max     = 3
    }

    task "main" {
      driver         = "raw_exec"
      leader         = true
      kill_signal    = "SIGINT"
      kill_timeout   = "5s"
      shutdown_delay = "1s"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      resources {
        cpu        = 50
        memory     = 32
        memory_max = 64
      }
    }

    task "helper" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
