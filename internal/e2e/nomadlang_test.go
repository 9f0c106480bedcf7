package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Job files in Nomad's HCL2 language (variables set with -var, locals,
// functions, dynamic blocks, runtime references beside them) and in
// Nomad's JSON API form (also as `nomad job inspect` prints it) run to a
// verdict through drover run, and the
// agent interpolates the runtime references the decoder kept as written.
func TestNomadLanguageFilesRun(t *testing.T) {
	d := startDev(t, t.TempDir())
	out, errOut, code := d.cli("", "run", "-var", "replicas=3", "-min-healthy-time", "1s", "../jobfile/testdata/good/variables.hcl")
	if code != 0 {
		t.Fatalf("run variables.hcl: exit %d\n%s%s", code, out, errOut)
	}
	if n := d.jobStatus("variables").Summary.Running; n != 3 {
		t.Fatalf("variables: %d running, want the 3 of -var replicas=3\n%s", n, out)
	}
	pids := taskProcs("variables", d.dataDir)
	if len(pids) != 3 {
		t.Fatalf("variables: %d task processes, want 3", len(pids))
	}
	// concat(["3600"], local.flags, ["--alloc=${NOMAD_ALLOC_ID}", ...]):
	// the local's flags, and the alloc's own ID, not the text.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pids[0]) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	joined := strings.Join(args, " ")
	if !strings.Contains(joined, "--http-port=8080 --metrics-port=9100") || !strings.Contains(joined, "--alloc=") ||
		strings.Contains(joined, "${") {
		t.Errorf("variables: task command line %q", args)
	}

	// Its tcp check has nothing to reach (the task only sleeps), so the
	// deployment would wait for its deadline: submit it and wait for the
	// instance to run.
	out, errOut, code = d.cli("", "run", "--detach", "../jobfile/testdata/good/nomad-api.json")
	if code != 0 {
		t.Fatalf("run nomad-api.json: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "api-form running 1/1", func() bool {
		return d.jobStatus("api-form").Summary.Running == 1
	})
	// The same file again is the same spec.
	out, errOut, code = d.cli("", "run", "--detach", "../jobfile/testdata/good/nomad-api.json")
	if code != 0 || !strings.Contains(out, "unchanged") {
		t.Errorf("nomad-api.json again: exit %d, want unchanged\n%s%s", code, out, errOut)
	}
	// What `nomad job inspect` prints, run as a batch job to completion.
	out, errOut, code = d.cli("", "run", "../jobfile/testdata/good/nomad-inspect.json")
	if code != 0 || !strings.Contains(out, "1/1 instances completed") {
		t.Errorf("run nomad-inspect.json: exit %d\n%s%s", code, out, errOut)
	}
	logs, _, _ := d.cli("", "logs", "nightly-report/render")
	if !strings.Contains(logs, "report for nightly-report") {
		t.Errorf("logs of nightly-report: %q", logs)
	}
	for _, job := range []string{"variables", "api-form"} {
		if _, errOut, code := d.cli("", "stop", job); code != 0 {
			t.Errorf("stop %s: exit %d: %s", job, code, errOut)
		}
	}
	waitFor(t, 30*time.Second, "no task processes left", func() bool {
		return len(taskProcs("variables", d.dataDir))+len(taskProcs("api-form", d.dataDir)) == 0
	})
}
