package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Signals are the signals a job file may name (kill_signal, a template's
// change_signal), by their Linux names.
var Signals = []string{"SIGABRT", "SIGALRM", "SIGCONT", "SIGHUP", "SIGINT", "SIGIO", "SIGKILL", "SIGPIPE",
	"SIGPROF", "SIGPWR", "SIGQUIT", "SIGSYS", "SIGTERM", "SIGTRAP", "SIGURG", "SIGUSR1", "SIGUSR2",
	"SIGVTALRM", "SIGWINCH", "SIGXCPU", "SIGXFSZ"}

// DefaultKillSignal is the signal that asks a task to stop when its job
// file names none.
const DefaultKillSignal = "SIGTERM"

// KillSignalOf is t's kill_signal, or DefaultKillSignal.
func (t *Task) KillSignalOf() string {
	if t.KillSignal == "" {
		return DefaultKillSignal
	}
	return t.KillSignal
}

// UserOf is the user the task's processes run as: the task's user, else
// its config's; "" is the agent's.
func (t *Task) UserOf() string {
	if t.User != "" {
		return t.User
	}
	return t.Config.User
}

// CheckSignal reports what is wrong with a signal name (a job file's, or
// drover alloc signal's), or "".
func CheckSignal(name string) string {
	if slices.Contains(Signals, name) {
		return ""
	}
	canonical := "SIG" + strings.TrimPrefix(strings.ToUpper(name), "SIG")
	if slices.Contains(Signals, canonical) {
		return fmt.Sprintf("unknown signal %q; write it %q", name, canonical)
	}
	return fmt.Sprintf("unknown signal %q; use one of %s", name, strings.Join(Signals, ", "))
}

// EphemeralDisk is a group's ephemeral_disk block, as Nomad's. drover
// reserves its size on the node, beside the tasks' own disk; a
// replacement instance always starts with an empty alloc directory, so
// sticky and migrate are accepted and do nothing.
type EphemeralDisk struct {
	SizeMB  int  `json:"size,omitempty"`
	Sticky  bool `json:"sticky,omitempty"`
	Migrate bool `json:"migrate,omitempty"`
}

// MaxShutdownDelay bounds shutdown_delay: a stop waits that long before
// the task is even asked to stop.
const MaxShutdownDelay = Duration(MaxStopAfter)

func validateTaskOptions(ps *Problems, path string, t *Task) {
	validateLogs(ps, path, t)
	if t.KillSignal != "" {
		if msg := CheckSignal(t.KillSignal); msg != "" {
			ps.Add(path+".kill_signal", "task %q: %s", t.Name, msg)
		}
	}
	if t.KillTimeout < 0 {
		ps.Add(path+".kill_timeout", "task %q: kill_timeout %s must not be negative", t.Name, t.KillTimeout.Short())
	}
	if t.ShutdownDelay < 0 || t.ShutdownDelay > MaxShutdownDelay {
		ps.Add(path+".shutdown_delay", "task %q: shutdown_delay must be between 0 and %s, got %s", t.Name, MaxShutdownDelay.Short(), t.ShutdownDelay.Short())
	}
	if t.User != "" && t.Config.User != "" && t.User != t.Config.User {
		ps.Add(path+".user", "task %q sets user %q and config user %q; write the user once, at task level as Nomad does", t.Name, t.User, t.Config.User)
	}
	r := t.Resources
	if r.MemoryMaxMB < 0 && r.MemoryMaxMB != MemoryMaxUnlimited {
		ps.Add(path+".resources.memory_max", "memory_max %d MB must not be negative: write -1 for no hard memory limit (memory stays what is reserved), or a limit at or above memory %d MB", r.MemoryMaxMB, r.MemoryMB)
	} else if r.MemoryMaxMB > 0 && r.MemoryMaxMB < r.MemoryMB {
		ps.Add(path+".resources.memory_max", "memory_max %d MB is less than memory %d MB; memory_max is the limit above the reserved memory: raise it or remove it", r.MemoryMaxMB, r.MemoryMB)
	}
}

func validateGroupOptions(ps *Problems, path string, g *Group) {
	leaders := 0
	for _, t := range g.Tasks {
		if t != nil && t.Leader {
			leaders++
		}
	}
	if leaders > 1 {
		ps.Add(path+".tasks", "group %q has %d leader tasks; at most one task may be the leader", g.Name, leaders)
	}
	if d := g.EphemeralDisk; d != nil && d.SizeMB < 0 {
		ps.Add(path+".ephemeral_disk.size", "ephemeral_disk size %d MB must not be negative", d.SizeMB)
	}
}
