# Node attributes no drover node publishes, as Nomad's files on cloud
# machines name them: each is a warning at its line. The constraint with
# is_not_set matches every node, so the job runs; the attribute the task
# interpolates is left as written, and the task checks that it is.
job "cloudless" {
  type = "batch"

  constraint {
    attribute = "${attr.platform.aws.instance-type}"
    operator  = "is_not_set"
  }

  group "check" {
    affinity {
      attribute = "${attr.unique.platform.gce.zone}"
      value     = "us-east1-b"
      weight    = 50
    }

    task "check" {
      driver = "raw_exec"

      env {
        KERNEL = "${attr.kernel.name}"
        AMI    = "${attr.platform.aws.ami-id}"
      }

      config {
        command = "/bin/sh"
        args = ["-c", <<EOT
test "$KERNEL" = linux && case "$AMI" in '$'{attr.platform.aws.ami-id}) ;; *) exit 1 ;; esac
EOT
        ]
      }
    }
  }
}
