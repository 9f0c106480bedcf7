package chaos

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	procfs "github.com/drover-org/drover/internal/proc"
)

// line is one line of the tasks' evidence file (chaostask's format).
type line struct {
	kind       string // START, WAIT, OVERLAP, STOP, EXIT
	t          time.Time
	job, group string
	index      int
	alloc      string
	node       string
	gen        int
	pid        int
	// WAIT and OVERLAP: the instance's lock holder, as it wrote itself
	// into the lock file ("-" when it had not yet).
	holder, holderNode string
	holderGen          int
	waited             time.Duration // OVERLAP
}

// readEvidence parses the evidence file; a torn or unknown line is
// skipped (a task killed mid-write).
func readEvidence(path string) ([]line, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		ns, err1 := strconv.ParseInt(fs[1], 10, 64)
		index, err2 := strconv.Atoi(fs[4])
		gen, _ := strconv.Atoi(fs[8])
		pid, err3 := strconv.Atoi(fs[9])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		l := line{kind: fs[0], t: time.Unix(0, ns), job: fs[2], group: fs[3], index: index, alloc: fs[5], node: fs[6], gen: gen, pid: pid}
		switch l.kind {
		case "WAIT", "OVERLAP":
			if len(fs) < 13 {
				continue
			}
			l.holder, l.holderNode = fs[10], fs[11]
			l.holderGen, _ = strconv.Atoi(fs[12])
			if l.kind == "OVERLAP" {
				if len(fs) < 14 {
					continue
				}
				w, _ := strconv.ParseInt(fs[13], 10, 64)
				l.waited = time.Duration(w)
			}
		case "START", "STOP", "EXIT":
		default:
			continue
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// liveTasks returns the suite's task processes that are alive (not
// zombies), by alloc ID, found in the process table by the run's marker in
// their environment.
func liveTasks(runID string) map[string]int {
	live := map[string]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := procfs.Environ(pid)
		if err != nil {
			continue
		}
		if v, _ := procfs.Getenv(env, "CHAOS_RUN"); v != runID {
			continue
		}
		alloc, _ := procfs.Getenv(env, "DROVER_ALLOC_ID")
		if st, err := procfs.ReadStat(pid); err == nil && !st.Dead() && alloc != "" {
			live[alloc] = pid
		}
	}
	return live
}

// killTasks SIGKILLs the run's task processes and waits, up to 10 s, until
// none is left: a killed agent leaves its tasks running, by design, and
// they must not outlive the run.
func killTasks(runID string) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		live := liveTasks(runID)
		if len(live) == 0 || time.Now().After(deadline) {
			return len(live)
		}
		for _, pid := range live {
			syscall.Kill(-pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
