# An exec task that asks for the node's process and IPC namespaces, as
# Nomad's exec driver takes them; the task checks it shares its parent's.
job "hostns" {
  type = "batch"

  group "check" {
    task "check" {
      driver = "exec"

      config {
        command  = "/bin/sh"
        args     = ["-c", "test \"$(readlink /proc/self/ns/pid)\" = \"$(readlink /proc/$PPID/ns/pid)\" && test \"$(readlink /proc/self/ns/ipc)\" = \"$(readlink /proc/$PPID/ns/ipc)\""]
        pid_mode = "host"
        ipc_mode = "host"
      }
    }
  }
}
