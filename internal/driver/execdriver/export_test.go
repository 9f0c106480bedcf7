package execdriver

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
)

// CountProcScans counts the passes over /proc that measuring makes until
// the test ends.
func CountProcScans(t *testing.T) *atomic.Int64 {
	n := new(atomic.Int64)
	scan := scanGroups
	scanGroups = func() (map[int]driver.Usage, error) {
		n.Add(1)
		return scan()
	}
	t.Cleanup(func() { scanGroups = scan })
	return n
}

// FillCgroupPool has d's cgroup pool (cgroup v1) hold n cgroups, and waits
// up to timeout for them; false if d has no pool or it did not fill.
func FillCgroupPool(d *Driver, n int, timeout time.Duration) bool {
	if d.cg == nil || d.cg.pool == nil {
		return false
	}
	p := d.cg.pool
	p.want.Store(int64(min(n, maxCgroupPool)))
	p.kick()
	deadline := time.Now().Add(timeout)
	for p.short() > 0 {
		if time.Now().After(deadline) || p.off.Load() {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// StopCgroupPool turns d's cgroup pool off: starts make their cgroups.
func StopCgroupPool(d *Driver) { d.Close() }

// CgroupPoolPrefix is the names d's pooled cgroups start with ("" without
// a pool).
func CgroupPoolPrefix(d *Driver) string {
	if d.cg == nil || d.cg.pool == nil {
		return ""
	}
	return d.cg.pool.prefix
}

// ForkingThread is the thread a start run from the calling goroutine's
// thread forks on (lockedRun), and the thread the calling goroutine is on
// once it has.
func ForkingThread() (forking, caller int) {
	errc := make(chan error, 1)
	lockedRun(func() (bool, error) { forking = unix.Gettid(); return false, nil }, errc)
	<-errc
	return forking, unix.Gettid()
}
