# HCL2 input variables, locals, functions and dynamic blocks, beside the
# runtime references the agent interpolates when the task starts.
variable "datacenters" {
  description = "Where the cache may run."
  type        = list(string)
  default     = ["dc1"]
}

variable "replicas" {
  type    = number
  default = 2
  validation {
    condition     = var.replicas > 0 && var.replicas <= 10
    error_message = "replicas must be 1 to 10."
  }
}

variable "ports" {
  type = map(number)
  default = {
    http    = 8080
    metrics = 9100
  }
}

variable "token" {
  type      = string
  default   = "s3cret"
  sensitive = true
}

variables {
  owner = "platform"
}

locals {
  name   = "cache-${lower(var.owner)}"
  labels = merge({ team = var.owner }, { tier = "backend" })
  flags  = [for p in sort(keys(var.ports)) : format("--%s-port=%d", p, var.ports[p])]
}

locals {
  memory = max(64, 32 * var.replicas)
}

job "variables" {
  datacenters = var.datacenters
  meta        = local.labels

  dynamic "constraint" {
    for_each = ["linux"]
    content {
      attribute = "${attr.kernel.name}"
      value     = constraint.value
    }
  }

  group "cache" {
    count = var.replicas

    network {
      dynamic "port" {
        for_each = var.ports
        labels   = [port.key]
        content {
          to = port.value
        }
      }
    }

    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = concat(["-c", "sleep 3600", "cache"], local.flags, ["--alloc=${NOMAD_ALLOC_ID}", "--host=${attr.unique.hostname}"])
      }
      env {
        NAME  = local.name
        TOKEN = var.token
        DC    = "${node.datacenter}/${join(",", var.datacenters)}"
        HASH  = substr(sha256(local.name), 0, 8)
      }
      resources {
        cpu    = 100
        memory = local.memory
      }
    }
  }
}
