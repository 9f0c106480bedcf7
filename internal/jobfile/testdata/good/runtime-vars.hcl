# Nomad's runtime variables and node values, kept as written for the agent
# to interpolate when the task starts.
job "runtime-vars" {
  meta { version = "3" }
  group "api" {
    network {
      port "http" {}
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "${NOMAD_TASK_DIR}/server"
        args = [
          "--listen", "${NOMAD_IP_http}:${NOMAD_PORT_http}",
          "--id=${NOMAD_ALLOC_ID}",
          "--ip", "${attr.unique.network.ip-address}",
          "--rack", "${ meta.rack }",
        ]
        prestart {
          command = "/bin/mkdir"
          args    = ["-p", "${NOMAD_ALLOC_DIR}/data/${NOMAD_ALLOC_INDEX}"]
        }
      }
      env {
        DC      = "Running on datacenter ${node.datacenter}"
        VERSION = "Version ${NOMAD_META_version}"
        HOME2   = "${env.HOME}/x"
        LITERAL = "$${NOMAD_ALLOC_ID}"
      }
      service {
        name = "api-${NOMAD_ALLOC_INDEX}"
        port = "http"
        tags = ["alloc-${NOMAD_ALLOC_ID}", "${node.unique.name}"]
      }
    }
  }
}
