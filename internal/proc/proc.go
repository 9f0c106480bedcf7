// Package proc reads what the agent and the exec driver need to know about
// a Linux process from /proc: its state, process group, start time, CPU
// time and resident memory and, for a zombie, its exit status. A PID alone does not name a process over
// time (PIDs are reused); a PID with its start time does.
package proc

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"
)

// Stat is the part of /proc/PID/stat that drover uses.
type Stat struct {
	PID   int
	State byte // R, S, D, T, Z, X, ...
	PGID  int
	// StartTicks is the start time in clock ticks after boot (field 22).
	StartTicks uint64
	// CPUTicks is the CPU time used, user and system, in clock ticks
	// (fields 14 and 15).
	CPUTicks uint64
	// RSSPages is the resident set size in pages (field 24).
	RSSPages uint64
	// ExitCode is the raw wait status of a zombie (field 52, Linux 3.5+);
	// meaningful only when State is 'Z'. HasExitCode says it was present.
	ExitCode    int
	HasExitCode bool
}

// CPUTime is the CPU time the process used, user and system.
func (s Stat) CPUTime() time.Duration {
	return time.Duration(s.CPUTicks) * time.Second / clockTicks
}

// RSSBytes is the process's resident set size in bytes.
func (s Stat) RSSBytes() uint64 { return s.RSSPages * pageSize }

// pageSize is the unit of the RSS in /proc/PID/stat.
var pageSize = uint64(os.Getpagesize())

// Dead reports a process that has exited (a zombie, or being reaped).
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' || s.State == 'x' }

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (Stat, error) {
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("proc: malformed stat")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 24-2 || len(f[0]) != 1 {
		return Stat{}, errors.New("proc: short stat")
	}
	s := Stat{PID: pid, State: f[0][0]}
	var err error
	if s.PGID, err = strconv.Atoi(string(f[5-3])); err != nil {
		return Stat{}, err
	}
	if s.StartTicks, err = strconv.ParseUint(string(f[22-3]), 10, 64); err != nil {
		return Stat{}, err
	}
	ut, err1 := strconv.ParseUint(string(f[14-3]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[15-3]), 10, 64)
	rss, err3 := strconv.ParseInt(string(f[24-3]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, err
	}
	s.CPUTicks, s.RSSPages = ut+st, uint64(max(rss, 0))
	if len(f) >= 52-2 {
		if c, err := strconv.Atoi(string(f[52-3])); err == nil {
			s.ExitCode, s.HasExitCode = c, true
		}
	}
	return s, nil
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc on every
// architecture Go supports.
const clockTicks = 100

var bootOnce struct {
	sync.Once
	t time.Time
}

// StartTime converts a start time in ticks to wall-clock time, to the
// second's accuracy of the boot time the kernel reports (zero if unknown).
func StartTime(ticks uint64) time.Time {
	bootOnce.Do(func() {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return
		}
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
				if sec, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
					bootOnce.t = time.Unix(sec, 0)
				}
			}
		}
	})
	if bootOnce.t.IsZero() {
		return time.Time{}
	}
	return bootOnce.t.Add(time.Duration(ticks) * time.Second / clockTicks)
}

// Environ returns the process's environment, "KEY=value\x00" entries.
func Environ(pid int) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
}

// Getenv returns the value of key in an environ block read by Environ.
func Getenv(env []byte, key string) (string, bool) {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(key)); ok && len(v) > 0 && v[0] == '=' {
			return string(v[1:]), true
		}
	}
	return "", false
}
