# Templates: a configuration file from node attributes and runtime
# variables, an env file, a file template; the task checks them.
job "templated" {
  type = "batch"

  group "app" {
    task "app" {
      driver = "raw_exec"

      template {
        data        = <<EOT
node = "{{ env "node.unique.name" }}"
kernel = "{{ env "attr.kernel.name" }}"
job = "{{ env "NOMAD_JOB_NAME" }}"
EOT
        destination = "local/app.toml"
        change_mode = "restart"
      }

      template {
        data        = <<EOT
APP_MODE={{ "production" | toUpper }}
EOT
        destination = "secrets/app.env"
        env         = true
        change_mode = "noop"
      }

      template {
        data          = "pid file goes here\n"
        destination   = "${NOMAD_ALLOC_DIR}/shared.txt"
        perms         = "0640"
        change_mode   = "signal"
        change_signal = "SIGHUP"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "grep -q 'kernel = \"linux\"' local/app.toml && grep -q 'job = \"templated\"' local/app.toml && test \"$APP_MODE\" = PRODUCTION && test -f \"$NOMAD_ALLOC_DIR/shared.txt\""]
      }
    }
  }
}
