# Rolling deployments: the job's update block is every group's default, and
# a group's own block overrides it field by field. The same job as
# update.json and update.yaml.
job "shop" {
  update {
    max_parallel     = 2
    min_healthy_time = "5s"
    healthy_deadline = "1m"
    auto_revert      = true
  }

  # Inherits the job's strategy whole.
  group "web" {
    count = 4
    task "server" {
      driver = "exec"
      config { command = "/usr/local/bin/shop" }
    }
  }

  # Overrides one field.
  group "worker" {
    count = 2
    update {
      max_parallel = 1
    }
    task "worker" {
      driver = "exec"
      config { command = "/usr/local/bin/shop-worker" }
    }
  }

  # Two canaries beside the old version, promoted once both are healthy.
  group "api" {
    count = 3
    update {
      canary            = 2
      auto_promote      = true
      health_check      = "task_states"
      progress_deadline = "15m"
    }
    task "api" {
      driver = "exec"
      config { command = "/usr/local/bin/shop-api" }
    }
  }
}
