package agent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// killOrphans finds task processes left running by an earlier run of this
// node's agent and kills their process groups; it returns how many.
//
// Tasks carry DROVER_NODE_ID in their environment and lead their own
// process group, so /proc tells which are ours without the agent writing
// anything per start (a file per start costs ~150 µs of ext4 journal time
// on these machines, the larger part of a task start).
//
// Re-adopting such tasks without restarting them comes with the cluster
// issue; until then the agent stops them at start, so that a restart never
// leaves two copies of an instance running.
func killOrphans(nodeID string) int {
	// Whole entries only: DROVER_ names are reserved (spec validation), so
	// a task cannot set or fake this one.
	want := []byte("DROVER_NODE_ID=" + nodeID + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !(bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...))) {
			continue
		}
		if syscall.Kill(-pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
