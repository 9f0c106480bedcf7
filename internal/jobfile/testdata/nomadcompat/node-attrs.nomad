# Constraints and affinities on Nomad's node attributes, as most of
# Nomad's own files write them.
job "attrs" {
  datacenters = ["*"]

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  constraint {
    attribute = "${attr.cpu.arch}"
    operator  = "set_contains_any"
    value     = "amd64,arm64"
  }

  constraint {
    attribute = "${attr.driver.raw_exec}"
    value     = "1"
  }

  group "probe" {
    constraint {
      attribute = "${attr.cpu.numcores}"
      operator  = ">="
      value     = "1"
    }

    constraint {
      attribute = "${attr.memory.totalbytes}"
      operator  = ">"
      value     = "0"
    }

    affinity {
      attribute = "${node.datacenter}"
      value     = "dc1"
      weight    = 50
    }

    task "probe" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
