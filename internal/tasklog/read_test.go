package tasklog_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/drover-org/drover/internal/tasklog"
)

// The agent reads a task's logs through an os.Root on its alloc directory
// (internal/agent/logfiles.go). These plain readers are the tests' way of
// checking what the Writer left on disk.

// tail returns the last n lines of the stream (all of it when n < 0),
// reading back into rotated files when the current one holds fewer.
func tail(dir, name string, n int) ([]byte, error) {
	base := tasklog.Path(dir, name)
	files := []string{base}
	for i := 1; ; i++ {
		p := fmt.Sprintf("%s.%d", base, i)
		if _, err := os.Stat(p); err != nil {
			break
		}
		files = append(files, p)
	}
	var out []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		out = append(b, out...)
		if n >= 0 && bytes.Count(out, []byte("\n")) > n {
			break
		}
	}
	if n < 0 {
		return out, nil
	}
	return tasklog.LastLines(out, n), nil
}

// followStream writes everything appended to the stream after offset bytes
// of the current file to out, until ctx ends. It reopens the file when
// rotation replaces it.
func followStream(ctx context.Context, dir, name string, offset int64, out io.Writer) error {
	path := tasklog.Path(dir, name)
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
			if nf, err := os.Open(path); err == nil {
				if fi, err = nf.Stat(); err != nil {
					nf.Close()
					return err
				}
				f = nf
				if _, err := f.Seek(offset, io.SeekStart); err != nil {
					return err
				}
			}
		}
		if f != nil {
			if err := copyToEOF(f, buf, out); err != nil {
				return err
			}
			// Rotated: the path now names another file. Finish the old
			// one, then start the new one from its beginning. The old one
			// is read again here: lines may have reached it after the read
			// above and before the rotation. The writer closed it before
			// renaming it, so this read is its last.
			if cur, err := os.Stat(path); err == nil && !os.SameFile(cur, fi) {
				if err := copyToEOF(f, buf, out); err != nil {
					return err
				}
				f.Close()
				f, offset = nil, 0
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// copyToEOF copies what f holds past its offset to out.
func copyToEOF(f *os.File, buf []byte, out io.Writer) error {
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil || n == 0 {
			return nil
		}
	}
}

// size returns the current file's size, the offset at which following
// starts when only new output is wanted.
func size(dir, name string) int64 {
	fi, err := os.Stat(tasklog.Path(dir, name))
	if err != nil {
		return 0
	}
	return fi.Size()
}
