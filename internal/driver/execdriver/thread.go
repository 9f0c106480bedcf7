package execdriver

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// A task is born in the cgroups (v1) and the network namespace of the
// thread that forks it, so a start that puts a task in either runs on an
// OS thread of its own, locked to its goroutine, moved there for the fork
// and back after it (startInV1, startInNetns).
//
// That thread is never the process's main thread. Go may run a new
// goroutine on the thread that started it, the main thread too, and the
// main thread is the thread group's leader: on cgroup v1 the whole
// process's memory is charged to the memory cgroup of its leader, so for
// the moment of the fork the agent's pages would be charged to the task
// (and the task's OOM killer could pick the agent). And a goroutine that
// ends locked ends its thread, except on the main thread, which the
// runtime cannot end and leaves wedged where it was moved.

// offMainThread runs work on a goroutine locked to an OS thread that is
// not the process's main thread, and returns work's error. When work says
// its thread is astray (it could not go back to the agent's cgroups or
// namespace), the thread is ended.
func offMainThread(work func() (astray bool, err error)) error {
	errc := make(chan error, 1)
	go lockedRun(work, errc)
	return <-errc
}

// lockedRun locks the calling goroutine to its thread and runs work there,
// sending work's error to errc. On the main thread it has a new goroutine
// run work instead, and holds the main thread until that one has locked
// its own: while the main thread is locked to this goroutine, no other can
// be scheduled on it.
func lockedRun(work func() (astray bool, err error), errc chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() != unix.Getpid() {
		runLocked(work, errc)
		return
	}
	locked := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(locked)
		runLocked(work, errc)
	}()
	<-locked
	runtime.UnlockOSThread()
}

// runLocked runs work on the calling goroutine, locked to its thread, and
// unlocks the thread after, unless work says it is astray: then the
// goroutine ends locked, and the runtime ends the thread with it.
func runLocked(work func() (astray bool, err error), errc chan<- error) {
	astray, err := work()
	if !astray {
		runtime.UnlockOSThread()
	}
	errc <- err
}
