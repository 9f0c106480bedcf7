package agent

import (
	"context"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/proc"
)

// leftTask is a task process that an earlier run of this node's agent
// started and left running (a standalone agent leaves its tasks running
// when it exits or dies).
type leftTask struct {
	driver.Process
	alloc, task string
	// driver is set for a task a driver.Finder found (a container): that
	// driver removes it, where a process is killed by its group.
	driver string
}

// findLeftTasks finds the task processes of this node that are running:
// process group leaders whose environment holds DROVER_NODE_ID=<node>.
// Their DROVER_ALLOC_ID and DROVER_TASK_NAME say which task each one is.
// DROVER_ names are reserved (spec validation), so a job cannot set or fake
// them. The start time that comes with each PID keeps a reused PID from
// ever being taken for a task.
//
// Processes in another PID namespace than the agent's are skipped: a
// container's processes carry DROVER_NODE_ID too, and are the docker
// driver's to find (findDriverTasks).
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
	selfNS, _ := os.Readlink("/proc/self/ns/pid")
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
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || ns != selfNS {
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

// findDriverTasks asks each driver that keeps its tasks apart (a
// driver.Finder: docker) for this node's. Running ones are left tasks, to
// adopt or stop as processes are; exited ones are removed here, since
// there is nothing left to adopt. A driver that cannot answer is logged
// and skipped: its tasks are found by the next agent start.
func (a *Agent) findDriverTasks(ctx context.Context) []leftTask {
	names := make([]string, 0, len(a.drivers))
	for name := range a.drivers {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []leftTask
	for _, name := range names {
		f, ok := a.drivers[name].(driver.Finder)
		if !ok {
			continue
		}
		// Bounded: a hung daemon must not keep the node from registering.
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		found, err := f.Find(fctx, a.nodeID)
		cancel()
		if err != nil {
			a.log.Warn("cannot look for tasks left by an earlier agent; carrying on", "driver", name, "err", err)
			continue
		}
		for _, t := range found {
			if t.PID == 0 {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := f.Remove(rctx, t.Process); err != nil {
					a.log.Warn("cannot remove an exited task left by an earlier agent", "driver", name, "id", t.ID, "err", err)
				}
				cancel()
				continue
			}
			out = append(out, leftTask{Process: t.Process, alloc: t.AllocID, task: t.Task, driver: name})
		}
	}
	return out
}

// removeLeft kills a left task at once, through the driver that found it
// or by its process group; true if it was there.
func (a *Agent) removeLeft(l leftTask) bool {
	if l.driver == "" {
		return killLeft(l)
	}
	f, ok := a.drivers[l.driver].(driver.Finder)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.Remove(ctx, l.Process) == nil
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
