package proc

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseExecutable drops from this process's resident set the pages of
// its own executable's read-only mappings (code and constants) that hold
// nothing the file does not, and returns how many bytes of mappings it
// dropped.
//
// drover is one binary: the agent carries the server's and etcd's code,
// and Go runs every package's initialization at start-up, which touches
// about 20 MB of that code and data once. An agent that then idles uses a
// small part of it. MADV_DONTNEED on a private file mapping forgets the
// process's copies; a page touched again is read back from the file (the
// page cache, as a rule). That is only safe for a mapping none of whose
// pages was ever written by the process, so a mapping is dropped only when
// it is not writable and /proc/self/smaps shows no anonymous page in it:
// a page of a private file mapping that the process wrote (relocations of
// a dynamically linked build) becomes anonymous. (Its Private_Dirty counts
// page-cache pages not yet written back, which are the file's own.)
func ReleaseExecutable() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	type mapping struct {
		start, end uint64
		clean      bool
	}
	var ms []*mapping
	var cur *mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 && !strings.HasSuffix(f[0], ":") {
			// A mapping's first line: start-end perms offset dev inode [path].
			cur = nil
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil && end > start && len(f) >= 6 && f[5] == exe && f[1][1] == '-' {
				cur = &mapping{start: start, end: end, clean: true}
				ms = append(ms, cur)
			}
			continue
		}
		if cur == nil || len(f) < 2 {
			continue
		}
		if f[0] == "Anonymous:" && f[1] != "0" {
			cur.clean = false
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	total := 0
	for _, m := range ms {
		if !m.clean {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED); errno != 0 {
			return total, errno
		}
		total += int(m.end - m.start)
	}
	return total, nil
}
