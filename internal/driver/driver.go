// Package driver defines how the agent runs a task: a Driver starts it and
// returns a Handle to wait for it and stop it. Drivers live in subpackages
// (execdriver today; docker comes with the containers issue) so that each
// outside system has one owning package.
package driver

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Driver starts tasks of one kind.
type Driver interface {
	// Name is the driver name job files use ("exec", "raw_exec").
	Name() string
	// Info says what the driver is like, for the agent to ask rather than
	// branch on driver names.
	Info() Info
	// Start starts the task and returns once it is running, or fails.
	Start(ctx context.Context, t Task) (Handle, error)
}

// Info is what a driver says of itself that no interface says: what it can
// do besides starting tasks is told by the interfaces it implements
// (Adopter, Finder, Sheller; its handles' Measurer, Execer, Detacher).
type Info struct {
	// OwnFilesystem: its tasks see a file system of their own (a
	// container's image), where the node's PATH and HOME and the alloc
	// directory mean nothing.
	OwnFilesystem bool
	// OwnNetwork: its tasks get a network of their own from the driver (a
	// container's), and do not join their alloc's namespace (Task.NetNS).
	OwnNetwork bool
	// Attributes are node attributes it adds to the node's fingerprint,
	// such as what isolates its tasks.
	Attributes map[string]string
}

// Task is what a driver needs to start one task.
type Task struct {
	Command string
	Args    []string
	// Env is the complete environment, "KEY=value".
	Env []string
	// Dir is the working directory. A start fails if it does not exist or
	// User cannot enter it.
	Dir string
	// User runs the process as this user, a name or a numeric uid; "" is
	// the agent's own user. Only an agent running as root can run a task
	// as another user.
	User string
	// Stdout and Stderr receive the task's output. The driver closes neither.
	Stdout, Stderr io.Writer

	// ID says which task this is, for drivers that label what they make
	// (containers) and find it again after an agent restart.
	ID TaskID
	// Resources are the task's reserved resources: limits for the drivers
	// that isolate (exec, docker).
	Resources spec.Resources
	// Ports are the alloc's ports; Config.Ports says which a container maps.
	Ports []spec.AllocPort
	// Mounts are the task's directories and host volumes, for a driver
	// that gives the task a file system of its own (docker) to mount into
	// it. The others run in the host's, where the environment names the
	// directories and the agent links the volumes into the task's.
	Mounts []Mount
	// Config is the task's whole config, for a driver's own fields
	// (docker's image, ports, labels...). Command, Args and the others
	// above are what to run now: the task's command, or a hook's.
	Config *spec.TaskConfig
	// Hook is set for a prestart or stop command: run beside the task, not
	// as it (docker runs it in the task's container when there is one).
	Hook bool
	// NetNS is the path of the network namespace the task runs in (its
	// alloc's, in network mode bridge or none); "" is the node's. The exec
	// drivers start the task in it; docker gives a container its own
	// network whatever this says.
	NetNS string
}

// Mount is a host directory and where the task sees it, read-only when
// ReadOnly.
type Mount struct {
	Host, Task string
	ReadOnly   bool
}

// TaskID names a task across the cluster.
type TaskID struct {
	NodeID, AllocID, AllocName, Job, Group, Task string
}

// Handle is a started task.
type Handle interface {
	// PID is the task's process ID (for a process group, its leader).
	PID() int
	// Wait returns a channel that yields the exit exactly once.
	Wait() <-chan Exit
	// Stop asks the task to stop (SIGTERM to its process group), kills it
	// (SIGKILL) if it is still running after grace, and returns the exit.
	// It returns early with ctx's error if ctx ends first.
	Stop(ctx context.Context, grace time.Duration) (Exit, error)
}

// Signaler is implemented by handles that can send their task a signal
// other than a stop's SIGTERM: a kill_signal, a template's change_signal.
type Signaler interface {
	// Signal sends sig to the task (every process of its process group,
	// or its container's main process).
	Signal(sig syscall.Signal) error
}

// Adopter is implemented by drivers that can take over a task that an
// earlier run of the agent started and left running, without restarting it.
type Adopter interface {
	// Adopt returns a Handle for the running task p. Its output from now on
	// goes to stdout and stderr (the driver closes neither). It fails when
	// p is no longer the process that was found (it exited, or its PID now
	// names another process).
	Adopt(ctx context.Context, p Process, stdout, stderr io.Writer) (Handle, error)
}

// Process identifies a running process across an agent restart: a PID
// alone could have been reused, so its start time comes with it.
type Process struct {
	// ID is the driver's own name for the task when it has one (a docker
	// container ID); PID and StartTicks are then informational.
	ID  string
	PID int
	// StartTicks is the process's start time in clock ticks since boot
	// (field 22 of /proc/PID/stat).
	StartTicks uint64
}

// Finder is implemented by drivers whose tasks live in a place of their own
// that outlasts the agent (docker's containers), instead of being found
// among the node's processes.
type Finder interface {
	// Find returns the tasks of node nodeID that the driver has, oldest
	// first, whether running or exited.
	Find(ctx context.Context, nodeID string) ([]Found, error)
	// Remove kills a found task at once and removes what is left of it.
	Remove(ctx context.Context, p Process) error
}

// Found is a task a Finder found.
type Found struct {
	Process
	AllocID, Task string
}

// Execer is implemented by handles whose task lives apart from the node
// (a container): script checks run inside it, with its environment.
type Execer interface {
	// Exec runs cmd in the task to completion, or until ctx ends, and
	// returns its exit code and its combined output (bounded).
	Exec(ctx context.Context, cmd []string) (code int, output []byte, err error)
}

// Measurer is implemented by handles that can tell what their task uses.
type Measurer interface {
	// Usage is the task's cumulative CPU time and its current memory.
	// Tasks measured in one round share what the round read of the whole
	// node; r may be nil, for a task measured alone.
	Usage(ctx context.Context, r *Round) (Usage, error)
}

// Round is one sampling of a node's tasks. What measuring a task reads of
// the whole node is read once per round and shared by the tasks measured
// in it: the process table, over which a process group's usage is summed,
// is one pass over /proc per round instead of one per task. Its zero
// value is ready; use a new Round for each sampling.
type Round struct {
	groupsOnce sync.Once
	groups     map[int]Usage
	groupsErr  error
}

// ProcessGroups returns the usage of every process group on the node,
// read by read on the round's first call (on every call for a nil Round).
func (r *Round) ProcessGroups(read func() (map[int]Usage, error)) (map[int]Usage, error) {
	if r == nil {
		return read()
	}
	r.groupsOnce.Do(func() { r.groups, r.groupsErr = read() })
	return r.groups, r.groupsErr
}

// Usage is what a task has used: CPU time since it started (all its
// processes) and resident memory now.
type Usage struct {
	CPU         time.Duration
	MemoryBytes uint64
}

// ErrNoRetry marks a start error that starting again will not fix (an image
// that is missing and cannot be pulled): the task fails at once rather
// than going through its restart policy.
var ErrNoRetry = errors.New("not retried")

// Detacher is implemented by handles that can let go of a task without
// stopping it: the agent stops reading its output and waiting for it, so
// that a later agent can adopt it. Detach returns once nothing of the
// task's output is in flight.
type Detacher interface {
	Detach()
}

// Exit is how a task ended.
type Exit struct {
	Code   int    // exit status, or -1 when killed by a signal
	Signal string // the signal's name when killed by one
	Err    error  // set when the driver could not wait for the task
	// StartErr is set when the task could not be started at all (its
	// command is missing, a prestart command failed, its log files could
	// not be opened): it never ran. Code is then -1.
	StartErr error
	// Unknown is set when the task ended but how could not be observed:
	// a process adopted after an agent restart is not the agent's child,
	// so its exit status is gone unless it was still a zombie when seen.
	// Code is then -1. An unknown exit is not successful.
	Unknown bool
	// OOMKilled is set when the task was killed for exceeding its memory
	// limit.
	OOMKilled bool
	Time      time.Time
}

// Successful reports a clean exit with status 0.
func (e Exit) Successful() bool {
	return e.Err == nil && e.StartErr == nil && !e.Unknown && e.Signal == "" && e.Code == 0
}

func (e Exit) String() string {
	switch {
	case e.StartErr != nil:
		return "start failed: " + e.StartErr.Error()
	case e.Err != nil:
		return "wait failed: " + e.Err.Error()
	case e.Unknown:
		return "exited (status unknown: adopted after an agent restart)"
	case e.OOMKilled:
		return "killed: out of memory"
	case e.Signal != "":
		return "killed by " + e.Signal
	}
	return "exit code " + itoa(e.Code)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Sheller is implemented by drivers that can run an operator's command
// inside a running task (drover exec): with the task's environment,
// directory, user and limits, beside the task's own process, streaming.
type Sheller interface {
	// Shell runs s.Cmd in the task that h runs (started from t) and returns
	// its exit code once it exits and its output is copied. It returns an
	// error, and no code, when the command could not start.
	Shell(ctx context.Context, h Handle, t Task, s ExecStreams) (int, error)
}

// ExecStreams are an exec'd command's: its argv, its terminal, its input
// and output.
type ExecStreams struct {
	Cmd []string
	// TTY runs the command on a terminal; Stderr is then unused (a
	// terminal has one output) and Resize carries its size changes.
	TTY bool
	// Size is the terminal's size at the start (zero: 80x24).
	Size           TermSize
	Stdin          io.Reader // nil: no input
	Stdout, Stderr io.Writer
	Resize         <-chan TermSize
}

// TermSize is a terminal's size in characters.
type TermSize struct{ Cols, Rows uint16 }
