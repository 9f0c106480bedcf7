# Artifacts from the node's own file system, fetched before the task
# starts: into local/, into the alloc's shared directory as Nomad writes
# it ("../alloc/"), and under a directory the job's meta names; and a
# template whose file name is the task's.
job "fetch" {
  type = "batch"

  meta {
    conf_dir = "local/conf"
  }

  group "fetch" {
    task "show" {
      driver = "raw_exec"

      artifact {
        source      = "file:///etc/hostname"
        destination = "local/hostname"
        mode        = "file"
      }

      artifact {
        source      = "file:///etc/hostname"
        destination = "../alloc/hostname"
        mode        = "file"
      }

      artifact {
        source      = "file:///etc/hostname"
        destination = "${NOMAD_META_conf_dir}/hostname"
        mode        = "file"
      }

      template {
        data        = "TASK={{ env \"NOMAD_TASK_NAME\" }}\n"
        destination = "${NOMAD_ALLOC_DIR}/${NOMAD_TASK_NAME}.env"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "cat local/hostname && cmp local/hostname \"$NOMAD_ALLOC_DIR/hostname\" && cmp local/hostname local/conf/hostname && grep -qx TASK=show \"$NOMAD_ALLOC_DIR/show.env\""]
      }
    }
  }
}
