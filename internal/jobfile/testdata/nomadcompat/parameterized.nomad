# A parameterized job: dispatched with meta and an optional payload.
job "resize" {
  type = "batch"

  parameterized {
    payload       = "optional"
    meta_required = ["width"]
    meta_optional = ["format"]
  }

  group "resize" {
    task "resize" {
      driver = "raw_exec"

      dispatch_payload {
        file = "input.txt"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo width=${NOMAD_META_width}"]
      }
    }
  }
}
