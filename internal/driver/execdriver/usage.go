package execdriver

import (
	"fmt"
	"os"
	"strconv"

	"github.com/opencontainers/cgroups"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/proc"
)

var (
	_ driver.Measurer = (*handle)(nil)
	_ driver.Measurer = (*adoptedHandle)(nil)
)

// measure is a task's usage: from its cgroup when it has one (every process
// it started, whichever process group), else summed over its process
// group from the round's process table (raw_exec, or exec without
// isolation), which misses a child that left the group and the CPU time
// of children already reaped.
func measure(r *driver.Round, cg cgroups.Manager, pgid int) (driver.Usage, error) {
	if cg != nil {
		return cgroupUsage(cg)
	}
	groups, err := r.ProcessGroups(scanGroups)
	if err != nil {
		return driver.Usage{}, err
	}
	u, ok := groups[pgid]
	if !ok {
		return driver.Usage{}, fmt.Errorf("process group %d has no process left", pgid)
	}
	return u, nil
}

// scanGroups is one pass over /proc: utime+stime and RSS summed by process
// group, for every group on the node. A variable so that tests can count
// the passes.
var scanGroups = func() (map[int]driver.Usage, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	groups := map[int]driver.Usage{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		s, err := proc.ReadStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		u := groups[s.PGID]
		u.CPU += s.CPUTime()
		u.MemoryBytes += s.RSSBytes()
		groups[s.PGID] = u
	}
	return groups, nil
}
