job "web" {
  priority = var.priority
  group "api" {
    count = length(["a", "b"])
    task "server" {
      driver = "exec"
      config {
        command = "/bin/server"
        args    = ["--id", "${NOMAD_ALLOC_ID}", "--name", "${var.name}"]
      }
    }
  }
}
