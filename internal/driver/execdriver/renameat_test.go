package execdriver

import (
	"os"
	"os/exec"
	"testing"
)

// TestBuildsWithoutRenameat: the package compiles for the Linux
// architectures that have no renameat system call, only renameat2
// (riscv64, loong64: golang.org/x/sys defines no SYS_RENAMEAT there), as
// it did before its cgroup renames became raw system calls.
func TestBuildsWithoutRenameat(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the package for other architectures")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	for _, arch := range []string{"riscv64", "loong64"} {
		cmd := exec.Command(goBin, "vet", ".")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOARCH=%s go vet: %v\n%s", arch, err, out)
		}
	}
}
