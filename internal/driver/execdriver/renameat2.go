//go:build riscv64 || loong64

package execdriver

import "golang.org/x/sys/unix"

// sysRenameat is the system call rawRenameat makes: these architectures
// have no renameat, only renameat2, which with flags 0 (rawRenameat's
// fifth argument) renames as renameat does.
const sysRenameat = unix.SYS_RENAMEAT2
