package execdriver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/drover-org/drover/internal/driver"
)

var (
	_ driver.Measurer = (*handle)(nil)
	_ driver.Measurer = (*adoptedHandle)(nil)
)

// measure is a task's usage: from its cgroup when it has one (every process
// it started, whichever process group), else summed over its process
// group from /proc (raw_exec, or exec without isolation), which misses a
// child that left the group and the CPU time of children already reaped.
func measure(cg cgroups.Manager, pgid int) (driver.Usage, error) {
	if cg != nil {
		return cgroupUsage(cg)
	}
	return groupUsage(pgid)
}

// pageSize is the unit of the RSS in /proc/PID/stat.
var pageSize = uint64(os.Getpagesize())

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for /proc on every architecture Go supports.
const userHZ = 100

// groupUsage sums utime+stime and RSS over the processes of group pgid.
// One pass over /proc per call: the agent measures every 10 seconds.
func groupUsage(pgid int) (driver.Usage, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return driver.Usage{}, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return driver.Usage{}, err
	}
	var u driver.Usage
	found := false
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		s, err := parseUsageStat(b)
		if err != nil {
			return driver.Usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		if s.pgid != pgid {
			continue
		}
		found = true
		u.CPU += time.Duration(s.ticks) * time.Second / userHZ
		u.MemoryBytes += s.rssPages * pageSize
	}
	if !found {
		return driver.Usage{}, fmt.Errorf("process group %d has no process left", pgid)
	}
	return u, nil
}

type usageStat struct {
	pgid     int
	ticks    uint64 // utime + stime
	rssPages uint64
}

// parseUsageStat reads fields 5 (pgrp), 14 and 15 (utime, stime) and 24
// (rss) of /proc/PID/stat.
func parseUsageStat(b []byte) (usageStat, error) {
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return usageStat{}, errors.New("malformed stat")
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3; field n is f[n-3]
	if len(f) < 24-2 {
		return usageStat{}, errors.New("short stat")
	}
	var s usageStat
	var err error
	if s.pgid, err = strconv.Atoi(string(f[5-3])); err != nil {
		return usageStat{}, err
	}
	ut, err1 := strconv.ParseUint(string(f[14-3]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[15-3]), 10, 64)
	rss, err3 := strconv.ParseInt(string(f[24-3]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return usageStat{}, err
	}
	s.ticks = ut + st
	s.rssPages = uint64(max(rss, 0))
	return s, nil
}
