package main

import (
	"log/slog"
	"syscall"
)

// raiseFileLimit raises this process's open-file limit (RLIMIT_NOFILE) to
// its hard limit, logs it and returns it: a server holds a descriptor per
// connection (one per agent), an agent one per task log. Go's runtime
// already raises the soft limit at start (since Go 1.19); this says what
// the process has either way. 0: unknown.
func raiseFileLimit(log *slog.Logger) uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		log.Warn("cannot read the open-file limit", "err", err)
		return 0
	}
	if l.Cur < l.Max {
		raised := l
		raised.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the open-file limit to its hard limit", "soft", l.Cur, "hard", l.Max, "err", err)
			return l.Cur
		}
		l = raised
	}
	log.Info("open-file limit", "limit", l.Cur)
	return l.Cur
}

// connLimit is the most HTTP connections a listener may hold open: want,
// or fewer when the open-file limit (files) leaves less after a reserve
// for everything else the process opens (the embedded etcd's files and
// connections, the registry's, dials to agents, task logs). Past the
// limit new connections wait in the kernel's queue, and the process keeps
// descriptors to work with: the embedded etcd dies when it finds none.
func connLimit(want int, files uint64, log *slog.Logger) int {
	if files == 0 {
		return want
	}
	reserve := min(files/4, 1024)
	most := int(min(files-reserve, uint64(want)))
	if most < want {
		log.Warn("the open-file limit allows fewer HTTP connections than asked; raise the hard limit (LimitNOFILE= in a systemd unit, ulimit -Hn) for more",
			"max_conns", most, "asked", want, "open_file_limit", files, "kept_for_etcd_and_files", reserve)
	}
	return most
}
