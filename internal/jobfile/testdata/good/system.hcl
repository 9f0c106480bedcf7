# A system job: one instance on every eligible node; it may preempt.
job "node-exporter" {
  type     = "system"
  priority = 90

  group "exporter" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    task "exporter" {
      driver = "raw_exec"
      config {
        command = "/usr/local/bin/node_exporter"
        args    = ["--web.listen-address=:9100"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
