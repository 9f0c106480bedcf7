package jobfile

// Example is the job file `drover init` writes: a small service with every
// field drover reads, each explained. It must decode cleanly (a test checks).
const Example = `# A drover job file. Run it with:  drover run example.hcl
# The format follows Nomad's job files for the exec and raw_exec drivers.

job "example" {
  # "service" tasks are restarted when they exit and run until stopped;
  # "batch" tasks run to completion (exit 0 means done).
  type = "service"

  # 1 (lowest) to 100 (highest); higher-priority jobs are placed first.
  priority = 50

  # How nodes are ranked: "binpack" (fullest first), "least_loaded" or
  # "epvm". affinity and spread blocks add soft preferences (see the README).
  scoring = "binpack"

  # The datacenters whose nodes may run it (drover agent --datacenter,
  # dc1 by default); "*" matches any run of characters. Without it: all.
  datacenters = ["dc1"]

  # Free-form key/value pairs, for people and tools.
  meta {
    owner = "team-a"
  }

  # A group is a set of tasks placed together on one node.
  group "web" {
    # How many copies of the group to run.
    count = 2

    # Ports reserved on the node for each copy, shown to its tasks as
    # DROVER_PORT_http. Without static = N, a free port is picked.
    network {
      port "http" {}
    }

    # What to do when a task exits on its own (a task may override it).
    restart {
      attempts = 2     # restarts allowed within the interval...
      interval = "30m"
      delay    = "15s" # ...each after this wait
      mode     = "fail" # then "fail" the task, or "delay" until the interval ends
    }

    # When an instance fails for good (its tasks used up their restarts), the
    # server replaces it, preferably on another node. These are the service
    # defaults; batch jobs get one more attempt within 24h, after 5s.
    reschedule {
      unlimited      = true          # or: attempts = 3 and interval = "1h"
      delay          = "30s"         # wait before the replacement...
      delay_function = "exponential" # ...doubled for each further failure ("constant": not)
      max_delay      = "1h"          # ...up to this
    }

    task "server" {
      # exec runs the command isolated on the node; raw_exec runs it as is.
      driver = "exec"

      # The command and its arguments, run without a shell.
      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do echo \"hello from $DROVER_ALLOC_NAME\"; sleep 5; done"]
      }

      # Environment variables for the task.
      env {
        GREETING = "hello"
      }

      # What the task reserves on its node: cpu in MHz, memory and disk
      # (scratch space in its alloc directory) in MB.
      resources {
        cpu    = 100
        memory = 64
        disk   = 10
      }

      # How long to wait after SIGTERM before SIGKILL on stop.
      kill_timeout = "10s"
    }
  }
}
`

// ExampleShort is the smallest useful job file: one group, one task.
const ExampleShort = `job "example" {
  group "web" {
    task "server" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
`
