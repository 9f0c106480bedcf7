// Command chaostask is the task the fault-injection suite (internal/chaos)
// runs: evidence of what really ran, written by the tasks themselves and
// by the kernel, not by drover.
//
// Each instance (job, group, index) has a lock file. A task appends to the
// evidence file, one write per line (O_APPEND):
//
//	START   ns job group index alloc node version gen pid
//	WAIT    ns job group index alloc node version gen pid holder-alloc holder-node holder-gen
//	OVERLAP ns job group index alloc node version gen pid holder-alloc holder-node holder-gen waited-ns
//	STOP    ns job group index alloc node version gen pid signal
//	EXIT    ns job group index alloc node version gen pid
//
// gen is $CHAOS_GEN, which the suite changes to update a job's tasks.
// It takes the instance's lock (flock) at start. When another process holds
// it, the instance runs twice: the task writes WAIT, naming the holder (who
// writes its alloc into the lock file), blocks until the kernel hands it
// the lock (the holder exited, however it died), and writes OVERLAP with
// how long that took. A task told to stop while it waits writes OVERLAP
// first. -run makes it a batch task that exits 0 after that long.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	evidence := flag.String("evidence", "", "evidence file to append to")
	locks := flag.String("locks", "", "directory of the instances' lock files")
	run := flag.Duration("run", 0, "exit 0 after this long (a batch task); 0: run until stopped")
	flag.Parse()
	if *evidence == "" || *locks == "" {
		fmt.Fprintln(os.Stderr, "chaostask: -evidence and -locks are required")
		os.Exit(2)
	}
	ev, err := os.OpenFile(*evidence, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaostask:", err)
		os.Exit(1)
	}
	env := func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return "-"
	}
	self := strings.Join([]string{env("DROVER_JOB_NAME"), env("DROVER_GROUP_NAME"), env("DROVER_ALLOC_INDEX"), env("DROVER_ALLOC_ID"),
		env("DROVER_NODE_NAME"), env("DROVER_JOB_VERSION"), env("CHAOS_GEN"), fmt.Sprint(os.Getpid())}, " ")
	write := func(kind string, extra ...string) {
		line := fmt.Sprintf("%s %d %s", kind, time.Now().UnixNano(), self)
		if len(extra) > 0 {
			line += " " + strings.Join(extra, " ")
		}
		ev.Write([]byte(line + "\n"))
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	write("START")

	name := strings.Join([]string{env("DROVER_JOB_NAME"), env("DROVER_GROUP_NAME"), env("DROVER_ALLOC_INDEX")}, ".")
	lock, err := os.OpenFile(filepath.Join(*locks, name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaostask:", err)
		os.Exit(1)
	}
	fd := int(lock.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			fmt.Fprintln(os.Stderr, "chaostask: flock:", err)
			os.Exit(1)
		}
		holder := readHolder(lock)
		write("WAIT", holder)
		began := time.Now()
		got := make(chan error, 1)
		go func() { got <- syscall.Flock(fd, syscall.LOCK_EX) }()
		select {
		case err := <-got:
			if err != nil {
				fmt.Fprintln(os.Stderr, "chaostask: flock:", err)
				os.Exit(1)
			}
			write("OVERLAP", holder, fmt.Sprint(time.Since(began).Nanoseconds()))
		case s := <-sigs:
			write("OVERLAP", holder, fmt.Sprint(time.Since(began).Nanoseconds()))
			write("STOP", s.String())
			os.Exit(0)
		}
	}
	// The holder's name, for a task that finds the lock taken.
	lock.Truncate(0)
	lock.WriteAt([]byte(strings.Join([]string{env("DROVER_ALLOC_ID"), env("DROVER_NODE_NAME"), env("CHAOS_GEN")}, " ")), 0)

	var done <-chan time.Time
	if *run > 0 {
		done = time.After(*run)
	}
	select {
	case s := <-sigs:
		write("STOP", s.String())
	case <-done:
		write("EXIT")
	}
}

// readHolder reads the lock holder's "alloc node gen", or dashes when
// it has not written it yet.
func readHolder(f *os.File) string {
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	if fields := strings.Fields(string(b[:n])); len(fields) == 3 {
		return strings.Join(fields, " ")
	}
	return "- - -"
}
