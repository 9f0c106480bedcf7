// Package tasklog writes a task's output to size-rotated files; the agent
// reads them back (the last N lines, and following new lines as they are
// written) with the helpers here.
//
// Files for a stream named "stdout" in dir:
//
//	stdout.log      the current file, appended to
//	stdout.log.1    the previous one (then .2, ... up to Keep)
//	stdout.log.idx  its time marks: "<unix nanos> <offset>" lines, at most
//	                one a second, saying the bytes from offset on were
//	                written from that time on (then .1.idx, ...): what
//	                `drover logs --since` reads, to a second
//
// Rotation renames; a follower notices that the current file was replaced
// and reopens it, so following survives rotation.
package tasklog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Defaults: 10 MB a file, 3 old files kept, as Nomad's logs block.
const (
	DefaultMaxBytes = 10 << 20
	DefaultKeep     = 3
)

// Writer appends to dir/name.log and rotates it when it passes MaxBytes.
//
// It works through an os.Root on dir, opened with the first file: a task that can write in
// dir (replacing its log file by a symlink to another file, or dir itself)
// cannot make the agent write or rename outside dir, and a log file that is
// not a regular file (a FIFO) is refused at once instead of blocking.
type Writer struct {
	mu       sync.Mutex
	dir      string
	root     *os.Root // on dir, from the first open on
	file     string   // name.log, inside root
	path     string
	maxBytes int64
	keep     int
	f        *os.File
	idx      *os.File // the current file's time marks
	lastMark time.Time
	size     int64
	closed   bool
	discard  bool // Discard's: every write is dropped
}

// markEvery is how often at most a time mark is written: --since is
// exact to about this.
const markEvery = time.Second

// IdxName is the time-mark file of a log file.
func IdxName(file string) string { return file + ".idx" }

// NewWriter returns a writer appending to dir/name.log. The file is opened
// on the first write, so a task that prints nothing costs no file, and a
// task's start never waits on creating its log files (its output waits in
// the pipe meanwhile).
func NewWriter(dir, name string, maxBytes int64, keep int) (*Writer, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if keep < 0 {
		keep = DefaultKeep
	}
	return &Writer{dir: dir, file: name + ".log", path: filepath.Join(dir, name+".log"), maxBytes: maxBytes, keep: keep}, nil
}

// Discard returns a writer that keeps nothing: the output of a task
// whose logs are disabled. It opens no file.
func Discard() *Writer { return &Writer{discard: true} }

// Path is the current file's path.
func Path(dir, name string) string { return filepath.Join(dir, name+".log") }

func (w *Writer) open() error {
	if w.root == nil {
		root, err := os.OpenRoot(w.dir)
		if err != nil {
			return err
		}
		w.root = root
	}
	// O_NONBLOCK: opening a FIFO with no reader fails instead of waiting;
	// a regular file ignores it.
	f, err := w.root.OpenFile(w.file, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0o640)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("tasklog: %s is not a regular file (%s); not writing to it", w.path, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.size = f, fi.Size()
	// The marks: lost marks cost --since precision, never output.
	if idx, err := w.root.OpenFile(IdxName(w.file), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0o640); err == nil {
		if st, err := idx.Stat(); err == nil && st.Mode().IsRegular() {
			w.idx = idx
		} else {
			idx.Close()
		}
	}
	w.lastMark = time.Time{}
	return nil
}

// Write appends p, rotating first if p would take the file past MaxBytes.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errors.New("tasklog: write to closed writer")
	}
	if w.discard {
		return len(p), nil
	}
	if w.f == nil {
		if err := w.open(); err != nil {
			return 0, err
		}
	}
	if w.size > 0 && w.size+int64(len(p)) > w.maxBytes {
		if err := w.rotate(); err != nil {
			return 0, err
		}
	}
	if now := time.Now(); w.idx != nil && now.Sub(w.lastMark) >= markEvery {
		fmt.Fprintf(w.idx, "%d %d\n", now.UnixNano(), w.size)
		w.lastMark = now
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	return n, err
}

// SinceOffset reads a log file's time marks and returns the offset from
// which its bytes may have been written at or after t; ok is false when
// none were. A mark's chunk (up to the next mark) was written within
// markEvery of its time, since a later write makes a new mark: so the
// answer may start up to markEvery before t, never after it.
func SinceOffset(marks []byte, t time.Time) (off int64, ok bool) {
	for _, line := range bytes.Split(marks, []byte("\n")) {
		var ns, o int64
		if _, err := fmt.Sscanf(string(line), "%d %d", &ns, &o); err != nil {
			continue
		}
		if time.Unix(0, ns).Add(markEvery).After(t) {
			return o, true // this chunk may hold bytes from t on
		}
	}
	return 0, false
}

func (w *Writer) rotate() error {
	w.f.Close()
	w.f = nil
	if w.idx != nil {
		w.idx.Close()
		w.idx = nil
	}
	for i := w.keep; i >= 1; i-- {
		src := w.file
		if i > 1 {
			src = fmt.Sprintf("%s.%d", w.file, i-1)
		}
		w.root.Rename(src, fmt.Sprintf("%s.%d", w.file, i))
		w.root.Rename(IdxName(src), IdxName(fmt.Sprintf("%s.%d", w.file, i)))
	}
	if w.keep == 0 {
		w.root.Remove(w.file)
		w.root.Remove(IdxName(w.file))
	}
	return w.open()
}

// Close closes the current file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.idx != nil {
		w.idx.Close()
		w.idx = nil
	}
	if w.root != nil {
		w.root.Close()
	}
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// LastLines returns the last n lines of b; a last line without its
// newline counts.
func LastLines(b []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	count := 0
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			count++
			if count == n {
				return b[i+1:]
			}
		}
	}
	return b
}

// PollInterval is how often a follower looks for new output. 100 ms keeps
// `drover logs -f` feeling live without measurable cost.
const PollInterval = 100 * time.Millisecond
