# A docker task as Nomad users write it, its image given with -var: ports
# by label, port_map, labels, ulimit, cap_drop and an env.
variable "image" {
  type        = string
  description = "The container image to run."
  default     = "busybox:1"
}

job "dockerrun" {
  group "web" {
    network {
      port "http" {
        to = 8080
      }
    }

    task "server" {
      driver = "docker"

      env {
        MODE = "corpus"
      }

      config {
        image              = var.image
        args               = ["-listen", "0.0.0.0:8080"]
        ports              = ["http"]
        labels             = { team = "platform" }
        cap_drop           = ["NET_RAW"]
        force_pull         = false
        image_pull_timeout = "1m"

        ulimit {
          nofile = "1024:2048"
        }
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
