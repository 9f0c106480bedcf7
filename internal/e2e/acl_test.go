package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestACLThroughTheCLI is the operator's story of tokens and namespaces on
// a real drover dev, all through the CLI: dev's own management token is
// found with no setup; a policy and a token for team-* namespaces let
// their holder run and read jobs there and nothing else; deleting the
// token locks its holder out.
func TestACLThroughTheCLI(t *testing.T) {
	d := startDev(t, t.TempDir())
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jobFile := func(name string) string { return sleepJob(t, name, "") }
	must := func(stdout, stderr string, code int) string {
		t.Helper()
		if code != 0 {
			t.Fatalf("exit %d: %s%s", code, stdout, stderr)
		}
		return stdout
	}

	// The CLI finds dev's token: no DROVER_TOKEN, no flag.
	out := must(d.cli("", "acl", "token", "self"))
	if !strings.Contains(out, "management") || !strings.Contains(out, "dev") {
		t.Fatalf("acl token self as dev's CLI: %s", out)
	}
	must(d.cli("", "run", "--detach", jobFile("web")))
	must(d.cli("", "acl", "policy", "apply", "team", write("team.hcl", `namespace "team-*" { capabilities = ["read", "submit", "logs"] }`)))
	var alice spec.ACLToken
	if err := json.Unmarshal([]byte(must(d.cli("", "acl", "token", "create", "--name", "alice", "--policy", "team", "-o", "json"))), &alice); err != nil || alice.SecretID == "" {
		t.Fatalf("token create -o json: %v %+v", err, alice)
	}

	as := func(token string, args ...string) (string, string, int) {
		t.Helper()
		return d.cliWith([]string{"DROVER_TOKEN=" + token}, "", args...)
	}
	// alice runs a job in her namespace (the file names none: --namespace).
	must(as(alice.SecretID, "run", "--detach", "--namespace", "team-a", jobFile("teamjob")))
	out = must(as(alice.SecretID, "status"))
	if !strings.Contains(out, "teamjob") || strings.Contains(out, "web") {
		t.Errorf("alice's job list shows other than her namespace's jobs:\n%s", out)
	}
	if ns := d.jobStatus("teamjob").Job.Namespace; ns != "team-a" {
		t.Errorf("teamjob is in namespace %q, want team-a", ns)
	}
	// Outside it she gets a 403 that says what is missing.
	refused := []struct {
		args []string
		want string
	}{
		{[]string{"status", "web"}, `may not read in namespace "default"`},
		{[]string{"stop", "web"}, `may not submit in namespace "default"`},
		{[]string{"nodes"}, "needs node read"},
		{[]string{"acl", "token", "list"}, "needs a management token"},
		{[]string{"run", "--detach", "--namespace", "other", jobFile("elsewhere")}, `may not submit in namespace "other"`},
	}
	for _, c := range refused {
		_, stderr, code := as(alice.SecretID, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("alice: drover %s: exit %d, stderr %q; want a refusal saying %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}
	if st := d.jobStatus("web"); st.Job.Stopped {
		t.Error("alice's refused stop stopped web")
	}

	// Deleting her token locks her out at once.
	must(d.cli("", "acl", "token", "delete", alice.AccessorID))
	// (The server that deleted it dropped it from its cache; another
	// would within its 1 s cache.)
	if _, stderr, code := as(alice.SecretID, "status"); code == 0 || !strings.Contains(stderr, "not known") {
		t.Errorf("a deleted token still works: exit %d, %s", code, stderr)
	}
	// A CLI with no token at all (another user's config dir, so dev's note
	// is not found, but with the certificates) is told how to get one.
	other := t.TempDir()
	cmd := exec.Command(droverBin, "status")
	cmd.Env = append(os.Environ(), "DROVER_ADDR="+d.addr, "XDG_CONFIG_HOME="+other, "DROVER_TLS_DIR="+filepath.Join(d.dataDir, "tls"))
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "needs an ACL token") || !strings.Contains(string(b), "DROVER_TOKEN") {
		t.Errorf("status without a token: %v\n%s", err, b)
	}
	// And one without the certificates cannot even connect, and is told why.
	cmd = exec.Command(droverBin, "status")
	cmd.Env = append(os.Environ(), "DROVER_ADDR="+d.addr, "XDG_CONFIG_HOME="+other)
	b, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "DROVER_TLS_DIR") {
		t.Errorf("status without certificates: %v\n%s", err, b)
	}
}
