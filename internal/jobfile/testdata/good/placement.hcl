# Every placement field: the same job as placement.json and placement.yaml.
job "shop" {
  scoring = "epvm"
  preempt = true

  # Keep away from the jobs this one replaces for good.
  constraint {
    operator = "conflicts"
    value    = "legacy-*"
  }

  affinity {
    attribute = "${attr.arch}"
    value     = "amd64"
    weight    = 30
  }

  spread {
    attribute = "${meta.zone}"
    weight    = 80
    target "us-east" {
      percent = 60
    }
    target "us-west" {
      percent = 40
    }
  }

  group "web" {
    count = 4

    constraint {
      operator = "colocate"
      value    = "cache"
    }

    affinity {
      attribute = "${meta.rack}"
      operator  = "set_contains_any"
      value     = "r1,r2"
      weight    = -40
    }

    spread {
      attribute = "${node.name}"
    }

    network {
      port "http" {
        static = 8080
      }
      port "metrics" {}
    }

    task "server" {
      driver = "exec"

      config {
        command  = "/usr/local/bin/shop"
        args     = ["--listen", ":8080"]
        work_dir = "/srv/shop"
        user     = "shop"

        prestart {
          command = "/bin/mkdir"
          args    = ["-p", "/srv/shop/cache"]
        }
        prestart {
          command = "/usr/local/bin/shop-migrate"
        }
        stop {
          command = "/usr/local/bin/shop"
          args    = ["drain"]
        }
      }

      resources {
        cpu    = 500
        memory = 256
        disk   = 300
      }

      affinity {
        attribute = "${attr.kernel}"
        operator  = "version"
        value     = ">= 6"
      }
    }
  }

  group "janitor" {
    constraint {
      operator = "replaces"
      value    = "old-janitor*"
    }

    task "sweep" {
      driver = "raw_exec"
      config {
        command = "/usr/local/bin/sweep"
      }
    }
  }
}
