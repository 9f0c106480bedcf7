# The docker keys Nomad users write.
job "proxy" {
  group "proxy" {
    network {
      port "http" {}
    }

    task "nginx" {
      driver = "docker"

      config {
        image      = "nginx:1.27"
        port_map {
          http = 80
        }
        entrypoint = ["/docker-entrypoint.sh"]
        command    = "nginx"
        args       = ["-g", "daemon off;"]
        labels {
          team = "edge"
        }
        mount {
          type   = "tmpfs"
          target = "/var/cache/nginx"
          tmpfs_options {
            size = 100000
          }
        }
        # Nomad's older list form of mount blocks.
        mounts = [
          {
            type     = "bind"
            source   = "local"
            target   = "/etc/nginx/conf.d"
            readonly = true
          }
        ]
        cap_drop = ["NET_RAW"]
        ulimit {
          nofile = "4096:8192"
        }
        sysctl = {
          "net.core.somaxconn" = "4096"
        }
        force_pull         = false
        image_pull_timeout = "10m"
        auth {
          username = "robot"
          password = "secret"
        }
        auth_soft_fail = true
        logging {
          type = "json-file"
          config {
            max-size = "10m"
          }
        }
      }
    }
  }
}
