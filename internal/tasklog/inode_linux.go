package tasklog

import (
	"os"
	"syscall"
)

func inode(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return inodeOf(fi)
}

func inodeOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
