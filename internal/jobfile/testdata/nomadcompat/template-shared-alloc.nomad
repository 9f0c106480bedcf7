# A template written into the alloc's shared directory with Nomad's
# "../alloc/" destination, read there by the task through NOMAD_ALLOC_DIR.
job "shared-template" {
  type = "batch"

  group "g" {
    task "reader" {
      driver = "raw_exec"

      template {
        data        = "alloc={{ env \"NOMAD_ALLOC_ID\" }}\n"
        destination = "../alloc/app.conf"
      }

      config {
        command = "/bin/cat"
        args    = ["${NOMAD_ALLOC_DIR}/app.conf"]
      }
    }
  }
}
