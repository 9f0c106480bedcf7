package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/tasklog"
)

// Reading a task's log files for the API, confined to its alloc directory.
//
// The task owns its directory: it can replace its log file, or a rotated
// one, with a symlink to /etc/passwd, to / or to another alloc's log, or
// with a FIFO that would block a reader. Every file is therefore opened
// through an os.Root on the alloc directory (openat, symlinks resolved
// inside it and refused when they lead out), must be a regular file, and
// is read at most maxLogRead bytes from its end. (CVE-2022-24683 and
// CVE-2026-6959 are Nomad's versions of this escape.)

// maxLogRead bounds what one log request reads into memory: everything a
// task's logs hold by default (the current file and tasklog.DefaultKeep
// rotated ones of tasklog.DefaultMaxBytes each). A task whose logs block
// keeps more, or that grows its own file past that, gets the newest bytes.
const maxLogRead = (tasklog.DefaultKeep + 1) * tasklog.DefaultMaxBytes

// errNotRegular: a log file that is a directory, FIFO, device or socket.
var errNotRegular = errors.New("not a regular file")

// allocRoot opens alloc id's log directory (alloc/logs) as a root: the
// alloc directory must lie inside the agent's allocs directory, and the
// log directory inside the alloc's, whatever its tasks made of alloc/ (a
// symlink to another alloc's logs is refused). release closes it, and
// ends the hold that keeps the alloc's trees from being recycled while it
// is open (dirholds.go).
func (a *Agent) allocRoot(id string) (root *os.Root, release func(), err error) {
	dir := filepath.Join(a.allocsDir, id)
	if !a.holds.hold(dir) {
		return nil, nil, fs.ErrNotExist // being recycled: forgotten
	}
	defer func() {
		if err != nil {
			a.holds.release(dir)
		}
	}()
	allocs, err := os.OpenRoot(a.allocsDir)
	if err != nil {
		return nil, nil, err
	}
	defer allocs.Close()
	alloc, err := allocs.OpenRoot(id)
	if err != nil {
		return nil, nil, err
	}
	defer alloc.Close()
	if root, err = alloc.OpenRoot(filepath.Join(sharedDirName, "logs")); err != nil {
		return nil, nil, err
	}
	return root, func() {
		root.Close()
		a.holds.release(dir)
	}, nil
}

// openLog opens a log file inside root for reading. O_NONBLOCK: opening a
// FIFO the task put there must not wait for a writer.
func openLog(root *os.Root, name string) (*os.File, os.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (%s)", name, errNotRegular, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// tailLog returns the last n lines (all when n < 0) of the stream name,
// across its rotated files, written at or after since (zero: all; to the
// second, by the files' time marks), and the size of the current file,
// where a follow starts. A file that does not exist is empty.
func tailLog(root *os.Root, name string, n int, since time.Time) ([]byte, int64, error) {
	base := tasklog.Path(".", name)
	var out []byte
	var offset int64
	budget := int64(maxLogRead)
	for i := 0; i < spec.MaxLogFiles && budget > 0; i++ {
		p := base
		if i > 0 {
			p += "." + strconv.Itoa(i)
		}
		f, fi, err := openLog(root, p)
		if errors.Is(err, fs.ErrNotExist) {
			if i == 0 {
				continue // rotated a moment ago, or nothing written yet
			}
			break
		}
		if err != nil {
			return nil, 0, err
		}
		size := fi.Size()
		if i == 0 {
			offset = size
		}
		from, older := max(0, size-budget), true
		if !since.IsZero() {
			cut, ok := int64(0), fi.ModTime().After(since)
			if ok {
				if marks, err := root.ReadFile(tasklog.IdxName(p)); err == nil {
					cut, ok = tasklog.SinceOffset(marks, since)
				}
			}
			if !ok {
				f.Close()
				break // this file, and the older ones, end before since
			}
			from, older = max(from, cut), cut == 0
		}
		b, err := io.ReadAll(io.NewSectionReader(f, from, size-from))
		f.Close()
		if err != nil {
			return nil, 0, err
		}
		budget -= int64(len(b))
		out = append(b, out...)
		if !older || (n >= 0 && bytes.Count(out, []byte("\n")) > n) {
			break
		}
	}
	if n >= 0 {
		out = tasklog.LastLines(out, n)
	}
	return out, offset, nil
}

// followLog writes what is appended to the stream name from offset on
// until ctx ends, reopening the file when rotation replaces it; every open
// goes through root. A file that cannot be opened inside root, or is not a
// regular file, is waited out: the follow then shows nothing more.
func followLog(ctx context.Context, root *os.Root, name string, offset int64, out flushWriter) {
	path := tasklog.Path(".", name)
	var f *os.File
	var fi os.FileInfo
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	t := time.NewTicker(tasklog.PollInterval)
	defer t.Stop()
	for {
		if f == nil {
			if nf, nfi, err := openLog(root, path); err == nil {
				if _, err := nf.Seek(min(offset, nfi.Size()), io.SeekStart); err != nil {
					nf.Close()
					return
				}
				f, fi = nf, nfi
			}
		}
		if f != nil {
			if !copyToEOF(f, buf, out) {
				return
			}
			if cur, err := root.Stat(path); err == nil && !os.SameFile(cur, fi) {
				// Rotated: finish the old file, then start the new one.
				if !copyToEOF(f, buf, out) {
					return
				}
				f.Close()
				f, offset = nil, 0
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// copyToEOF copies f to out until EOF; false when out failed.
func copyToEOF(f *os.File, buf []byte, out flushWriter) bool {
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return false
			}
			out.Flush()
		}
		if err != nil || n == 0 {
			return true
		}
	}
}
