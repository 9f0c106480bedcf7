package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The agent records each running task's process group in the alloc
// directory (state.json). If the agent dies without stopping its tasks, the
// next start finds them there.
//
// Re-adopting such tasks without restarting them comes with the cluster
// issue; until then the agent stops them at start (killOrphans) so that a
// restart never leaves two copies of an instance running.

type procRecord struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // /proc/<pid>/stat field 22: defeats PID reuse
}

type allocState struct {
	Tasks map[string]procRecord `json:"tasks"`
}

func procStartTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after it are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

func writeAllocState(dir string, st *allocState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}

// killOrphans kills the process groups of tasks recorded by an earlier run
// of the agent that are still alive, and returns how many it killed.
func killOrphans(allocsDir string) int {
	entries, err := os.ReadDir(allocsDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(allocsDir, e.Name(), "state.json"))
		if err != nil {
			continue
		}
		var st allocState
		if json.Unmarshal(b, &st) != nil {
			continue
		}
		for _, p := range st.Tasks {
			if p.PID <= 1 || p.StartTime == 0 || procStartTime(p.PID) != p.StartTime {
				continue
			}
			if syscall.Kill(-p.PID, syscall.SIGKILL) == nil {
				n++
			}
		}
		os.Remove(filepath.Join(allocsDir, e.Name(), "state.json"))
	}
	return n
}
