package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runDrover runs the drover command line with args, stdin as its input,
// and returns what main would print (stdout, stderr and the error line)
// and its exit code. (runValidate is validate's, without the error line.)
func runDrover(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	err := execute(root, args)
	if err == nil {
		return out.String(), 0
	}
	// As main: the exit code an exitError carries, and its message unless
	// the command printed what the user needs already.
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.silent {
			return out.String(), code
		}
	}
	return out.String() + "Error: " + err.Error() + "\n", code
}

// A word drover has no command for exits 1 with cobra's suggestion, under
// drover and under every command that groups others; such a command
// alone still prints its help and exits 0.
func TestUnknownCommandsExit1WithASuggestion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deploymnt"}, `unknown command "deploymnt" for "drover"; did you mean "deployment"?`},
		{[]string{"deployment", "lst"}, `unknown command "lst" for "drover deployment"; did you mean "deployment list"?`},
		{[]string{"deployment", "stats", "web"}, `unknown command "stats" for "drover deployment"; did you mean "deployment status"?`},
		{[]string{"acl", "token", "craete"}, `unknown command "craete" for "drover acl token"; did you mean "acl token create"?`},
		{[]string{"tls", "frobnicate"}, `unknown command "frobnicate" for "drover tls"; drover tls --help lists its commands`},
		{[]string{"completion", "bassh"}, `unknown command "bassh" for "drover completion"; did you mean "completion bash"?`},
		{[]string{"ps", "extra"}, `unknown command "extra" for "drover ps"`},
	} {
		out, code := runDrover(t, "", c.args...)
		if code != exitFailure || !strings.Contains(out, c.want) {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant exit 1 and %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
	for _, args := range [][]string{{"deployment"}, {"acl", "token"}, {}} {
		if out, code := runDrover(t, "", args...); code != 0 || !strings.Contains(out, "Available Commands:") {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant its help and exit 0", strings.Join(args, " "), code, out)
		}
	}
}

// Nomad's single-dash long flags reach drover as the long flags; shorthand
// flags, flag values and what follows -- are left as they are.
func TestSingleDashLongFlags(t *testing.T) {
	for _, c := range []struct{ args, want []string }{
		{[]string{"run", "-detach", "job.hcl"}, []string{"run", "--detach", "job.hcl"}},
		{[]string{"stop", "-purge", "web", "-address=https://10.0.0.1:4646"}, []string{"stop", "--purge", "web", "--address=https://10.0.0.1:4646"}},
		{[]string{"status", "-address", "-odd-", "-o", "json", "web"}, []string{"status", "--address", "-odd-", "-o", "json", "web"}},
		{[]string{"logs", "-tail", "-1", "-f", "web"}, []string{"logs", "--tail", "-1", "-f", "web"}},
		{[]string{"logs", "--tail", "-detach", "web"}, []string{"logs", "--tail", "-detach", "web"}},
		{[]string{"exec", "-it", "web", "-alloc=3f2a", "--", "ls", "-detach"}, []string{"exec", "-it", "web", "--alloc=3f2a", "--", "ls", "-detach"}},
		{[]string{"node", "drain", "-deadline", "1h", "-ojson", "n1"}, []string{"node", "drain", "--deadline", "1h", "-ojson", "n1"}},
		{[]string{"run", "-", "-unknown"}, []string{"run", "-", "-unknown"}},
	} {
		if d := cmp.Diff(c.want, singleDashLongFlags(newRoot(), c.args)); d != "" {
			t.Errorf("%q (-want +got):\n%s", c.args, d)
		}
	}
	// Through the whole command line: the flag is taken, not read as -d -e -t ...
	out, code := runDrover(t, "", "run", "-detach", "-address=http://127.0.0.1:1", "/nonexistent/job.hcl")
	if code != exitFailure || !strings.Contains(out, "reading job file /nonexistent/job.hcl") {
		t.Errorf("drover run -detach: exit %d, printed:\n%s", code, out)
	}
	out, code = runDrover(t, "", "-address=http://127.0.0.1:1", "status")
	if code != exitFailure || !strings.Contains(out, "cannot reach the drover server at http://127.0.0.1:1") {
		t.Errorf("drover -address=... status: exit %d, printed:\n%s", code, out)
	}
}

// Nomad's nouns run drover's commands: each alias prints what the drover
// command prints for the same arguments (no server here, so each answers
// from its own checks, or names the address it could not reach); a Nomad
// verb drover lacks exits 1 naming the drover command nearest to it.
func TestNomadNouns(t *testing.T) {
	dead := "-address=http://127.0.0.1:1"
	valid := writeFile(t, "ok.hcl", `job "ok" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
`)
	for _, c := range []struct{ nomad, drover []string }{
		{[]string{"job", "run", "-detach", "/nonexistent/job.hcl"}, []string{"run", "--detach", "/nonexistent/job.hcl"}},
		{[]string{"job", "plan", "/nonexistent/job.hcl"}, []string{"plan", "/nonexistent/job.hcl"}},
		{[]string{"job", "validate", valid}, []string{"validate", valid}},
		{[]string{"job", "status", "web", dead}, []string{"status", "web", dead}},
		{[]string{"job", "stop", "-purge", "web", dead}, []string{"stop", "--purge", "web", dead}},
		{[]string{"job", "history", "web", dead}, []string{"history", "web", dead}},
		{[]string{"job", "inspect", "web", dead}, []string{"status", "web", dead}},
		{[]string{"node", "status", dead}, []string{"nodes", dead}},
		{[]string{"node", "status", "n1", "-o", "yaml"}, []string{"nodes", "n1", "-o", "yaml"}},
		{[]string{"alloc", "status", "3f2a", dead}, []string{"exec", "--alloc", "3f2a", "web", dead, "--", "true"}},
		{[]string{"alloc", "logs", "3f2a", dead}, []string{"exec", "--alloc", "3f2a", "web", dead, "--", "true"}},
		{[]string{"alloc", "exec", "3f2a", dead, "--", "true"}, []string{"exec", "--alloc", "3f2a", "web", dead, "--", "true"}},
	} {
		got, gotCode := runDrover(t, "", c.nomad...)
		want, wantCode := runDrover(t, "", c.drover...)
		if gotCode != wantCode || got != want || strings.Contains(got, "unknown command") || strings.Contains(got, "unknown flag") {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant as drover %s: exit %d, printed:\n%s",
				strings.Join(c.nomad, " "), gotCode, got, strings.Join(c.drover, " "), wantCode, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "scale", "web", "g", "3", dead}, "cannot reach the drover server at http://127.0.0.1:1"},
		{[]string{"scale", "web", "lots"}, `count "lots" is not a number of instances`},
		// The alloc verbs are drover's own: they reach for the server
		// (-task takes one dash too), and a bad signal is refused first.
		{[]string{"alloc", "restart", "-task", "t", "3f2a", dead}, "cannot reach the drover server at http://127.0.0.1:1"},
		{[]string{"alloc", "stop", "3f2a", dead}, "cannot reach the drover server at http://127.0.0.1:1"},
		{[]string{"alloc", "signal", "3f2a", "hup", dead}, "cannot reach the drover server at http://127.0.0.1:1"},
		{[]string{"alloc", "signal", "3f2a", "SIGNOPE", dead}, `unknown signal "SIGNOPE"; use one of`},
		{[]string{"alloc", "stats", "3f2a"}, `did you mean "alloc status"?`},
	} {
		if out, code := runDrover(t, "", c.args...); code != exitFailure || !strings.Contains(out, c.want) {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant exit 1 and %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
}
