//go:build !riscv64 && !loong64

package execdriver

import "golang.org/x/sys/unix"

// sysRenameat is the system call rawRenameat makes: renameat, where the
// architecture has it.
const sysRenameat = unix.SYS_RENAMEAT
