package agent

import (
	"os"
	"sort"
	"strconv"
	"syscall"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/proc"
)

// leftTask is a task process that an earlier run of this node's agent
// started and left running (a standalone agent leaves its tasks running
// when it exits or dies).
type leftTask struct {
	driver.Process
	alloc, task string
}

// findLeftTasks finds the task processes of this node that are running:
// process group leaders whose environment holds DROVER_NODE_ID=<node>.
// Their DROVER_ALLOC_ID and DROVER_TASK_NAME say which task each one is.
// DROVER_ names are reserved (spec validation), so a job cannot set or fake
// them. The start time that comes with each PID keeps a reused PID from
// ever being taken for a task.
//
// /proc tells which processes are ours without the agent writing anything
// per start (a file per start costs ~150 µs of ext4 journal time on these
// machines, the larger part of a task start).
//
// A group whose leader has exited but was not reaped (a zombie) is no
// running task, and a prestart or stop command (DROVER_HOOK=1) is not the
// task: what is left of such a group is killed here, silently.
func findLeftTasks(nodeID string) []leftTask {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []leftTask
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		st, err := proc.ReadStat(pid)
		if err != nil || st.PGID != pid {
			continue
		}
		env, err := proc.Environ(pid)
		if err != nil {
			continue
		}
		if node, _ := proc.Getenv(env, "DROVER_NODE_ID"); node != nodeID {
			continue
		}
		if _, hook := proc.Getenv(env, "DROVER_HOOK"); hook || st.Dead() {
			// A prestart or stop command whose agent died: the task is
			// started (or stopped) again from the beginning.
			syscall.Kill(-pid, syscall.SIGKILL)
			continue
		}
		l := leftTask{Process: driver.Process{PID: pid, StartTicks: st.StartTicks}}
		l.alloc, _ = proc.Getenv(env, "DROVER_ALLOC_ID")
		l.task, _ = proc.Getenv(env, "DROVER_TASK_NAME")
		out = append(out, l)
	}
	// Oldest first: when two processes claim one task, the first is kept.
	sort.Slice(out, func(i, j int) bool { return out[i].StartTicks < out[j].StartTicks })
	return out
}

// killLeft kills a left task's process group at once; true if it was there.
func killLeft(l leftTask) bool {
	// Only if the PID still names the process that was found.
	st, err := proc.ReadStat(l.PID)
	if err != nil || st.StartTicks != l.StartTicks {
		return false
	}
	return syscall.Kill(-l.PID, syscall.SIGKILL) == nil
}
