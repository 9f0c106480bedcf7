package jobfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// unitJob is the job every unit starts from: one group and one exec task
// named after the unit, systemd's Restart=no, canonicalized after edit.
func unitJob(name string, edit func(j *spec.Job, t *spec.Task)) *spec.Job {
	t := &spec.Task{Name: name, Driver: "exec", Restart: &spec.RestartPolicy{Attempts: new(int),
		Interval: spec.Duration(10 * time.Second), Delay: spec.Duration(100 * time.Millisecond), Mode: spec.RestartFail}}
	j := &spec.Job{Name: name, Type: spec.JobService, Groups: []*spec.Group{{Name: name, Count: 1, Tasks: []*spec.Task{t}}}}
	edit(j, t)
	j.Canonicalize()
	return j
}

func restartDelay(delay time.Duration) *spec.RestartPolicy {
	return &spec.RestartPolicy{Attempts: new(5), Interval: spec.Duration(10 * time.Second), Delay: spec.Duration(delay), Mode: spec.RestartDelay}
}

func TestUnitGoodFiles(t *testing.T) {
	tests := []struct {
		file string // under testdata/units/good, read with DecodeFile
		want *spec.Job
	}{
		{"hello.service", unitJob("hello", func(j *spec.Job, t *spec.Task) {
			j.Meta = map[string]string{"description": "Hello World"}
			t.Config = spec.TaskConfig{Command: "/bin/bash", Args: []string{"-c", "while true; do echo Hello; sleep 1; done"}}
		})},
		{"global.service", unitJob("global", func(j *spec.Job, t *spec.Task) {
			j.Type = spec.JobSystem
			j.Meta = map[string]string{"description": "Monitoring agent on every node"}
			j.Constraints = []*spec.Constraint{{Attribute: "${meta.region}", Operator: "=", Value: "us-east"}}
			t.Config = spec.TaskConfig{Command: "/usr/bin/monitor-agent", Args: []string{"--interval", "10s"}}
			t.Restart = restartDelay(100 * time.Millisecond)
		})},
		{"metadata.service", unitJob("metadata", func(j *spec.Job, t *spec.Task) {
			j.Constraints = []*spec.Constraint{
				{Attribute: "${meta.region}", Operator: spec.OpSetContainsAny, Value: "us-east,us-west"},
				{Attribute: "${meta.disk}", Operator: "=", Value: "ssd"},
				{Attribute: "${meta.zone}", Operator: spec.OpSetContainsAny, Value: "a,b"},
			}
			t.Config = spec.TaskConfig{Command: "/usr/bin/db-server"}
		})},
		// Only the template apache@.service is on disk.
		{"apache@1.service", unitJob("apache@1", func(j *spec.Job, t *spec.Task) {
			j.Meta = map[string]string{"description": "Apache web server 1"}
			j.Constraints = []*spec.Constraint{{Operator: spec.OpConflicts, Value: "apache@*"}}
			t.Env = map[string]string{"SITE": "apache-1", "UNIT": "apache@1.service"}
			t.Config = spec.TaskConfig{
				Command: "/usr/bin/docker",
				Args:    strings.Fields("run --rm --name apache-1 -p 80:80 coreos/apache /usr/sbin/apache2ctl -D FOREGROUND"),
				Prestart: []spec.Command{{Command: "/bin/sh",
					Args: []string{"-c", `"$0" "$@" || true`, "/usr/bin/docker", "rm", "-f", "apache-1"}}},
				Stop: &spec.Command{Command: "/usr/bin/docker", Args: []string{"stop", "apache-1"}},
			}
			t.Restart = restartDelay(5 * time.Second)
		})},
		{"apache-discovery@7.service", unitJob("apache-discovery@7", func(j *spec.Job, t *spec.Task) {
			j.Meta = map[string]string{"description": "Announce apache@7"}
			j.Constraints = []*spec.Constraint{{Operator: spec.OpColocate, Value: "apache@7"}}
			t.Config = spec.TaskConfig{Command: "/bin/sh", Args: []string{"-c",
				"while true; do etcdctl set /services/website/apache@7 up --ttl 60; sleep 45; done"}}
		})},
		{"full.service", unitJob("full", func(j *spec.Job, t *spec.Task) {
			j.Meta = map[string]string{"description": "Everything at once", "documentation": "https://example.com/docs man:app(8)"}
			j.Constraints = []*spec.Constraint{
				{Attribute: "${node.id}", Operator: "=", Value: "3b4c2a9a7e1f4d0b8f6e5d4c3b2a1908"},
			}
			t.Env = map[string]string{"PORT": "8080", "GREETING": "hello world", "MODE": "production", "FLAGS": "-v -x"}
			t.Config = spec.TaskConfig{
				Command: "/usr/bin/app",
				// ${GREETING} stays one word, $FLAGS as a word of its own
				// splits, $$ is a '$'.
				Args:    []string{"--port", "8080", "--greeting", "hello world", "-v", "-x", "--cost", "$5", "--unit", "full.service"},
				WorkDir: "/srv/app",
				User:    "www-data",
				Prestart: []spec.Command{
					{Command: "/usr/bin/mkdir", Args: []string{"-p", "/srv/app/cache"}},
					{Command: "/bin/sh", Args: []string{"-c", `"$0" "$@" || true`, "/usr/bin/rm", "/srv/app/stale.pid"}},
				},
				// The ':' prefix turns expansion off.
				Stop: &spec.Command{Command: "/usr/bin/app-ctl", Args: []string{"stop", "$PORT"}},
				// A '-' changes nothing: a poststop's failure is only reported.
				Poststop: []spec.Command{
					{Command: "/usr/bin/rm", Args: []string{"-f", "/srv/app/app.pid"}},
					{Command: "/usr/bin/app-ctl", Args: []string{"cleanup", "--mode", "production"}},
				},
			}
			three := 3
			t.Restart = &spec.RestartPolicy{Attempts: &three, Interval: spec.Duration(5 * time.Minute), Delay: spec.Duration(90 * time.Second), Mode: spec.RestartDelay}
			t.KillTimeout = spec.Duration(20 * time.Second)
		})},
		{"oneshot.service", unitJob("oneshot", func(j *spec.Job, t *spec.Task) {
			j.Type = spec.JobBatch
			j.Constraints = []*spec.Constraint{
				{Attribute: "${meta.role}", Operator: "=", Value: "backup"},
				{Operator: spec.OpConflicts, Value: "backup*"},
			}
			t.Config = spec.TaskConfig{Command: "/usr/bin/backup", Args: []string{"--run"},
				Prestart: []spec.Command{{Command: "/usr/bin/backup", Args: []string{"--prepare"}}}}
			t.Restart = restartDelay(100 * time.Millisecond)
		})},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := DecodeFile(filepath.Join("testdata/units/good", tt.file))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("job differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnitDecodeByName checks that Decode, which the API and stdin paths
// use, dispatches on the .service extension like DecodeFile does.
func TestUnitDecodeByName(t *testing.T) {
	src, err := os.ReadFile("testdata/units/good/hello.service")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("hello.service", src)
	if err != nil {
		t.Fatal(err)
	}
	want, err := DecodeFile("testdata/units/good/hello.service")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decode and DecodeFile differ (-DecodeFile +Decode):\n%s", diff)
	}
}

func TestUnitFileErrors(t *testing.T) {
	tests := []struct{ path, want string }{
		{"testdata/units/good/apache@.service",
			"testdata/units/good/apache@.service: apache@.service is a template unit; run an instance such as apache@1.service"},
		{"testdata/units/good/nothere@1.service",
			"reading job file testdata/units/good/nothere@1.service: neither it nor its template testdata/units/good/nothere@.service exists"},
		{"testdata/units/good/nothere.service",
			"reading job file testdata/units/good/nothere.service: open testdata/units/good/nothere.service: no such file or directory"},
	}
	for _, tt := range tests {
		job, err := DecodeFile(tt.path)
		if err == nil {
			t.Errorf("%s: decoded without error: %+v", tt.path, job)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("%s:\n got: %s\nwant: %s", tt.path, err, tt.want)
		}
	}
}

// TestUnitBadFiles compares the whole error text of each broken unit with
// its .golden file; `go test -run TestUnitBadFiles -update` rewrites them.
func TestUnitBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/units/bad/*.service")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("only %d bad units; keep at least 15", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			job, err := decodeTestFile(t, path)
			if err == nil {
				t.Fatalf("decoded without error: %+v", job)
			}
			if job != nil {
				t.Errorf("returned a job along with the error")
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(path, unitSuffix) + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("error text differs from %s\n--- got:\n%s--- want:\n%s", golden, got, want)
			}
		})
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{`a b  c`, []string{"a", "b", "c"}, ""},
		{`"a b" 'c d'`, []string{"a b", "c d"}, ""},
		{`a"b c"d`, []string{"ab cd"}, ""},
		{`"" x`, []string{"", "x"}, ""},
		{`a\sb \x41 "q\"uote" \\`, []string{"a b", "A", `q"uote`, `\`}, ""},
		{`'single "double" inside'`, []string{`single "double" inside`}, ""},
		{`"open`, nil, `a " quote is not closed`},
		{`bad \q`, nil, `unknown escape \q; write \\ for a backslash`},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("splitWords(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("splitWords(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("splitWords(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseTimespan(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"100ms", 100 * time.Millisecond, true},
		{"5", 5 * time.Second, true},
		{"1min 30s", 90 * time.Second, true},
		{"2h", 2 * time.Hour, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"0", 0, true},
		{"5 parsecs", 0, false},
		{"infinity", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := parseTimespan(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseTimespan(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// FuzzDecodeUnit is FuzzDecode for unit files, whose line index and
// go-systemd's parser must agree on any input: no panic, and either a valid
// job or a non-empty spec.Problems.
func FuzzDecodeUnit(f *testing.F) {
	files, _ := filepath.Glob("testdata/units/*/*.service")
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		job, err := Decode("web@1.service", src)
		if err != nil {
			var ps spec.Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error is not a non-empty spec.Problems: %#v", err)
			}
			if job != nil {
				t.Fatalf("job returned with an error")
			}
			return
		}
		if ps := job.Validate(); len(ps) > 0 {
			t.Fatalf("decoded job does not validate: %v", ps)
		}
		if _, err := DecodeJSONBody(mustJSON(t, job)); err != nil {
			t.Fatalf("decoded job's JSON does not decode: %v", err)
		}
	})
}
