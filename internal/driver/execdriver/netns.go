package execdriver

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// A task in its alloc's network namespace is started as a cgroup v1 task
// is (startInV1): a process is born in the network namespace of the
// thread that forks it, so start runs on a locked OS thread (thread.go)
// moved into the namespace (setns) and back after the fork. A thread that
// cannot go back is never given back to the runtime: it would run other
// goroutines' network calls in the task's namespace. Its goroutine ends
// locked, and the runtime ends the thread with it.

// errThreadAstray says the locked thread could not return to the agent's
// network namespace: its goroutine must end without unlocking it, so that
// the runtime ends the thread.
var errThreadAstray = errors.New("the starting thread could not return to the agent's network namespace")

// startInNetns runs start on a locked thread of its own inside the
// network namespace at path.
func startInNetns(path string, start func() error) error {
	return offMainThread(func() (bool, error) {
		err := joinNetns(path, start)
		return errors.Is(err, errThreadAstray), err
	})
}

// joinNetns runs start on the calling thread, which must be locked, inside
// the network namespace at path, and moves the thread back. It returns an
// error wrapping errThreadAstray when the thread could not go back.
func joinNetns(path string, start func() error) error {
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the agent's network namespace: %w", err)
	}
	defer unix.Close(home)
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the alloc's network namespace %s: %w", path, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("join the alloc's network namespace %s: %w", path, err)
	}
	err = start()
	if berr := unix.Setns(home, unix.CLONE_NEWNET); berr != nil {
		return fmt.Errorf("%w: %w (start: %v)", errThreadAstray, berr, err)
	}
	return err
}

// inNetns runs start in the network namespace at path, or as it is when
// path is "".
func inNetns(path string, start func() error) error {
	if path == "" {
		return start()
	}
	return startInNetns(path, start)
}
