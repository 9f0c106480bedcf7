package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/jobfile"
	"github.com/drover-org/drover/internal/spec"
)

// corpusDir holds the Nomad-style job files of the compatibility corpus;
// its validate-only.txt names those that need what a test machine lacks.
const corpusDir = "../jobfile/testdata/nomadcompat"

// TestNomadCorpusRuns: every file of the Nomad-style corpus that is not
// validate-only runs unmodified on a real drover dev: `drover run FILE`
// exits 0, and the API then shows each instance's main tasks running with
// a process that /proc has (service and system jobs), or every task
// exited 0 (batch and sysbatch; a periodic job's forced launch, a
// parameterized job's dispatch). Docker files run the project's
// FROM-scratch test image, given with -var image=; they skip without
// Docker (required when CI=true).
func TestNomadCorpusRuns(t *testing.T) {
	files, err := filepath.Glob(corpusDir + "/*.nomad")
	if err != nil {
		t.Fatal(err)
	}
	jsonFiles, _ := filepath.Glob(corpusDir + "/*.json")
	files = append(files, jsonFiles...)
	only := validateOnly(t)
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	ran := 0
	for _, path := range files {
		base := filepath.Base(path)
		if only[base] != "" {
			continue
		}
		ran++
		t.Run(base, func(t *testing.T) {
			job, _, err := jobfile.DecodeFileWith(path, jobfile.Options{})
			if err != nil {
				t.Fatalf("not valid: %v", err)
			}
			args := []string{"run", "--timeout", "90s"}
			for _, g := range job.Groups {
				for _, task := range g.Tasks {
					if task.Driver == "docker" && !slices.Contains(args, "-var") {
						dockertest.Require(t)
						args = append(args, "-var", "image="+dockertest.Image(t))
					}
				}
			}
			out, errOut, code := d.cli("", append(args, path)...)
			if code != 0 {
				t.Fatalf("drover run %s: exit %d\n%s\n%s", base, code, out, errOut)
			}
			t.Cleanup(func() { d.cli("", "stop", "--purge", job.Name) })

			name := job.Name
			switch {
			case job.Periodic != nil:
				out, errOut, code = d.cli("", "periodic", "force", name)
				if code != 0 {
					t.Fatalf("drover periodic force %s: exit %d\n%s\n%s", name, code, out, errOut)
				}
				name = onlyChild(t, d, name)
			case job.Parameterized != nil:
				dispatch := []string{"dispatch", name}
				for _, k := range job.Parameterized.MetaRequired {
					dispatch = append(dispatch, "-meta", k+"=1")
				}
				out, errOut, code = d.cli("", dispatch...)
				if code != 0 {
					t.Fatalf("drover dispatch %s: exit %d\n%s\n%s", name, code, out, errOut)
				}
				name = onlyChild(t, d, name)
				t.Cleanup(func() { d.cli("", "stop", "--purge", name) })
			}
			checkVerdict(t, d, name)
		})
	}
	if ran < 10 {
		t.Errorf("only %d files of the corpus ran; want every file not in validate-only.txt", ran)
	}
}

// validateOnly reads the corpus's validate-only.txt: file name -> reason.
func validateOnly(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(corpusDir + "/validate-only.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, ": ")
		out[name] = reason
	}
	return out
}

// onlyChild waits for the one child a force or dispatch made.
func onlyChild(t *testing.T, d *devProc, parent string) string {
	t.Helper()
	var kids []string
	waitFor(t, 30*time.Second, "a child of "+parent, func() bool {
		kids = children(t, d, parent)
		return len(kids) > 0
	})
	if len(kids) != 1 {
		t.Fatalf("children of %s: %q, want one", parent, kids)
	}
	return kids[0]
}

// checkVerdict waits, at most 90 s, until the API shows job's verdict: a
// batch kind complete with every task's exit code 0 (a sidecar's: ended); a service or
// system job running with each main task's process alive in /proc.
func checkVerdict(t *testing.T, d *devProc, name string) {
	t.Helper()
	var last string
	ok := func() bool {
		st := d.jobStatus(name)
		batch := st.Job.Type.Completes()
		if len(st.Allocations) == 0 {
			last = "no instances"
			return false
		}
		for _, a := range st.Allocations {
			if a.Status == nil {
				last = a.Name + ": no status reported yet"
				return false
			}
			for _, task := range a.Tasks {
				ts := a.Status.Tasks[task.Name]
				if ts == nil {
					last = fmt.Sprintf("%s: task %s has no state", a.Name, task.Name)
					return false
				}
				sidecar := task.Lifecycle != nil && task.Lifecycle.Sidecar
				switch {
				case batch && sidecar && ts.State != spec.TaskDead:
					last = fmt.Sprintf("%s: sidecar %s %s", a.Name, task.Name, ts.State)
					return false
				case batch && !sidecar && (ts.ExitCode == nil || *ts.ExitCode != 0 || ts.State != spec.TaskDead):
					last = fmt.Sprintf("%s: task %s %s, exit %v", a.Name, task.Name, ts.State, ts.ExitCode)
					return false
				case !batch && task.Lifecycle == nil && ts.State != spec.TaskRunning:
					last = fmt.Sprintf("%s: task %s %s", a.Name, task.Name, ts.State)
					return false
				case !batch && task.Lifecycle == nil && task.Driver != "docker" && !procAlive(ts.PID):
					last = fmt.Sprintf("%s: task %s pid %d not in /proc", a.Name, task.Name, ts.PID)
					return false
				}
			}
		}
		want := spec.JobRunning
		if batch {
			want = spec.JobComplete
		}
		last = fmt.Sprintf("job state %s", st.Summary.State)
		return st.Summary.State == want
	}
	deadline := time.Now().Add(90 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no verdict within 90s: %s", name, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// procAlive says whether /proc has a process pid.
func procAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}
