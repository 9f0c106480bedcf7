package execdriver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// v1 has no fork into a cgroup, but a child is born in the cgroups of the
// thread that forks it, and v1 moves single threads (the tasks file). So
// exec's tasks are forked by one OS thread of the agent's, the forker,
// which joins each task's cgroups before it forks the task. Moving a
// thread is a write to a tasks file per hierarchy, some 20 to 46 µs each
// on the 2-core VM of docs/performance.md: going into the task's cgroup and
// back to the agent's after each fork was six of them, the larger part of
// what an exec start cost beyond a raw_exec one. The forker does not go
// back after a fork: it stays in the task's cgroups, parked, and moves from
// there straight into the next task's, three writes a start.
//
// While it waits there it runs nothing, so the task is charged nothing
// but the forker's move to the next task (one write per hierarchy); its
// memory stays charged to the agent (v1 charges a process's pages to its
// leader's memory cgroup). It leaves a task's cgroup before that cgroup is
// removed (vacate, from removeCgroup), when a start fails, and for good
// after forkerIdle without a start, when it goes back to the agent's
// cgroups and its thread is given back. A thread that cannot go back to
// the agent's cgroups, or namespace, is ended rather than left to fork
// other tasks into the wrong cgroup.
type v1Forker struct {
	s    *cgroupSetup
	reqs chan forkReq
	mu   sync.Mutex
	// alive: the forker's goroutine runs; pending: requests sent or about
	// to be, which it serves before it may end. Both under mu.
	alive   bool
	pending int
	// in is the task cgroup the thread is in, "" for the agent's: written
	// by the forker's goroutine before it answers a request, read by
	// vacate, which asks the forker only when it is in the cgroup.
	in atomic.Pointer[string]
}

// forkerIdle is how long the forker waits in a task's cgroup for the next
// start before it goes back to the agent's and ends.
const forkerIdle = time.Second

// forkReq asks the forker to run start in cgroup name, or with start nil,
// to leave cgroup name if it is in it.
type forkReq struct {
	name  string
	start func() error
	done  chan error
}

// v1Forkers are the forkers of this process, for removeCgroup to vacate
// a cgroup in any of them (several drivers in one process: tests).
var v1Forkers struct {
	sync.Mutex
	all []*v1Forker
}

func newV1Forker(s *cgroupSetup) *v1Forker {
	f := &v1Forker{s: s, reqs: make(chan forkReq)}
	v1Forkers.Lock()
	v1Forkers.all = append(v1Forkers.all, f)
	v1Forkers.Unlock()
	return f
}

// do has the forker serve r, starting it if it does not run, and returns
// what r's start returned.
func (f *v1Forker) do(r forkReq) error {
	f.mu.Lock()
	if !f.alive {
		if r.start == nil {
			f.mu.Unlock()
			return nil // not running: it is in the agent's cgroups
		}
		f.alive = true
		go f.run()
	}
	f.pending++
	f.mu.Unlock()
	r.done = make(chan error, 1)
	f.reqs <- r
	return <-r.done
}

// vacate makes every forker of this process that is in the cgroup whose
// memory hierarchy's directory is path leave it.
func vacate(path string) {
	v1Forkers.Lock()
	all := v1Forkers.all
	v1Forkers.Unlock()
	for _, f := range all {
		if name, ok := f.nameOf(path); ok {
			if in := f.in.Load(); in != nil && *in == name {
				f.do(forkReq{name: name})
			}
		}
	}
}

// nameOf is the task cgroup name of path if path is in f's memory
// hierarchy's drover directory.
func (f *v1Forker) nameOf(path string) (string, bool) {
	return filepath.Base(path), filepath.Dir(path) == f.s.parents["memory"]
}

// run is the forker's goroutine, on a thread locked to it.
func (f *v1Forker) run() {
	runtime.LockOSThread()
	tid := []byte(strconv.Itoa(unix.Gettid()))
	in := "" // the task cgroup the thread is in, "" for the agent's
	idle := time.NewTimer(forkerIdle)
	defer idle.Stop()
	for {
		select {
		case r := <-f.reqs:
			f.mu.Lock()
			f.pending--
			f.mu.Unlock()
			var err error
			in, err = f.serve(tid, in, r)
			f.setIn(in)
			r.done <- err
			if errors.Is(err, errThreadAstray) {
				f.end()
				return // locked: the runtime ends the thread with this goroutine
			}
			idle.Reset(forkerIdle)
		case <-idle.C:
			if in != "" {
				if f.home(tid) != nil {
					f.end()
					return // locked: the runtime ends the thread with this goroutine
				}
				in = ""
				f.setIn(in)
			}
			f.mu.Lock()
			if f.pending > 0 {
				f.mu.Unlock()
				idle.Reset(forkerIdle)
				continue
			}
			f.alive = false
			f.mu.Unlock()
			runtime.UnlockOSThread()
			return
		}
	}
}

// setIn notes which task cgroup the thread is in, for vacate.
func (f *v1Forker) setIn(name string) { f.in.Store(&name) }

// end marks the forker's thread gone: requests already sent are served
// by a new one, else the next start starts one.
func (f *v1Forker) end() {
	f.mu.Lock()
	if f.pending > 0 {
		go f.run()
	} else {
		f.alive = false
	}
	f.mu.Unlock()
}

// serve runs r on the forker's thread tid, which is in task cgroup in,
// and returns where the thread is after it.
func (f *v1Forker) serve(tid []byte, in string, r forkReq) (string, error) {
	if r.start == nil {
		if in != r.name {
			return in, nil
		}
		if err := f.home(tid); err != nil {
			return in, fmt.Errorf("%w: %w", errThreadAstray, err)
		}
		return "", nil
	}
	var err error
	for _, h := range f.s.v1 {
		if err = writeAt(h.dir, r.name+"/tasks", string(tid)); err != nil {
			err = fmt.Errorf("%w in the %s hierarchy: %w", errJoin, h.controller, err)
			break
		}
	}
	if err == nil {
		err = r.start()
	}
	if errors.Is(err, errThreadAstray) {
		return in, err
	}
	if err != nil {
		// Not in a task's cgroup with nothing of it started: back to the
		// agent's.
		if herr := f.home(tid); herr != nil {
			return in, fmt.Errorf("%w: %w (start: %v)", errThreadAstray, herr, err)
		}
		return "", err
	}
	return r.name, nil
}

// home moves thread tid back into the agent's own cgroups.
func (f *v1Forker) home(tid []byte) error {
	for _, h := range f.s.v1 {
		if _, err := unix.Pwrite(h.home, tid, 0); err != nil {
			return &os.PathError{Op: "write", Path: "tasks of the agent's " + h.controller + " cgroup", Err: err}
		}
	}
	return nil
}
