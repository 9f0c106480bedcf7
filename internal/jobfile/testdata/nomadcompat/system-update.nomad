# A system job with Nomad's update block: accepted, not applied.
job "node-exporter" {
  type = "system"

  update {
    max_parallel = 1
    stagger      = "10s"
  }

  group "exporter" {
    task "exporter" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
