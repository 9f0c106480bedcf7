# HCL2 as Nomad's job language has it: variables with defaults and
# validation, locals, functions and a dynamic block.
variable "workers" {
  type    = number
  default = 2

  validation {
    condition     = var.workers > 0
    error_message = "Need at least one worker."
  }
}

variable "labels" {
  type    = map(string)
  default = { tier = "batch", team = "data" }
}

variable "token" {
  type      = string
  default   = "not-a-secret"
  sensitive = true
}

locals {
  name    = "hcl2-${lower("DEMO")}"
  workers = [for i in range(var.workers) : format("worker-%02d", i)]
}

job "hcl2" {
  type = "batch"

  meta {
    labels = join(",", sort(keys(var.labels)))
  }

  group "run" {
    dynamic "task" {
      for_each = local.workers
      labels   = [task.value]

      content {
        driver = "raw_exec"

        env {
          NAME  = local.name
          INDEX = task.key
        }

        config {
          command = "/bin/sh"
          args    = ["-c", "test \"$NAME\" = hcl2-demo && test -n \"$INDEX\""]
        }
      }
    }
  }
}
