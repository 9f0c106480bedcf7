# Nomad's runtime variables and node attributes interpolated into a
# task's env and args; the batch task checks them and exits 0.
job "interp" {
  type = "batch"

  meta {
    owner = "platform"
  }

  group "check" {
    count = 2

    network {
      port "http" {}
    }

    task "check" {
      driver = "raw_exec"

      env {
        ALLOC       = "${NOMAD_ALLOC_ID}"
        WHERE       = "${node.unique.name}/${attr.kernel.name}"
        LISTEN_ADDR = "${NOMAD_ADDR_http}"
      }

      config {
        command = "/bin/sh"
        args = ["-c", <<EOT
test -n "$ALLOC" && test "$ALLOC" = "$NOMAD_ALLOC_ID" &&
test "$${WHERE##*/}" = linux && test -n "$${WHERE%/*}" &&
test "$NOMAD_JOB_NAME" = interp && test "$NOMAD_GROUP_NAME" = check &&
test "$NOMAD_TASK_NAME" = check && test "$NOMAD_META_owner" = platform &&
test "${NOMAD_ALLOC_INDEX}" -ge 0 && test -n "$NOMAD_PORT_http" &&
test -d "$NOMAD_TASK_DIR" && test -d "$NOMAD_ALLOC_DIR" && test -d "$NOMAD_SECRETS_DIR"
EOT
        ]
      }
    }
  }
}
