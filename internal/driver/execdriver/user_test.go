package execdriver_test

import (
	"context"
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
)

// requireRoot skips a test that needs root, except in CI, which runs as
// root: there a skip would hide that the test never ran.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI runs the tests as root, but this run is not root")
	}
	t.Skip("needs root to run a task as another user")
}

// procIDs reads the Uid:, Gid: and Groups: lines of /proc/PID/status.
func procIDs(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "Uid" || k == "Gid" || k == "Groups" {
			out = append(out, k+": "+strings.Join(strings.Fields(v), " "))
		}
	}
	return strings.Join(out, "\n")
}

func TestUserRunsTaskAsThatUser(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("this machine has no user nobody: %v", err)
	}
	gids, err := nobody.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	// Exactly nobody's ids: real, effective, saved and file system ids, and
	// none of the agent's (root's) supplementary groups.
	want := "Uid: " + strings.Repeat(nobody.Uid+" ", 3) + nobody.Uid + "\n" +
		"Gid: " + strings.Repeat(nobody.Gid+" ", 3) + nobody.Gid + "\n" +
		"Groups: " + strings.Join(gids, " ")
	for _, name := range []string{"nobody", nobody.Uid} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, err := execdriver.New("exec").Start(context.Background(), driver.Task{
				Command: "sleep", Args: []string{"30"}, Env: []string{testPATH}, Dir: "/", User: name,
			})
			if err != nil {
				t.Fatalf("Start as %s: %v", name, err)
			}
			pgid := h.PID()
			t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
			if got := procIDs(t, h.PID()); got != want {
				t.Errorf("task's ids as user %q:\n%s\nwant:\n%s", name, got, want)
			}
		})
	}
}

func TestUserRootAsRootNeedsNoChange(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	var stdout syncBuffer
	h, err := execdriver.New("exec").Start(context.Background(), driver.Task{
		Command: "id", Args: []string{"-u"}, Env: []string{testPATH}, Dir: "/", User: "root", Stdout: &stdout,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if e := waitExit(t, h, 10*time.Second); !e.Successful() || stdout.String() != "0\n" {
		t.Errorf("exit %s, output %q; want exit code 0, output \"0\\n\"", e, stdout.String())
	}
}

func TestUserErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ user, want string }{
		{"no-such-user-drover", `user "no-such-user-drover" does not exist on this node (user: unknown user no-such-user-drover); create it, or change the task's user: not retried`},
		{"4000000000", `user "4000000000": no user has that uid on this node (user: unknown userid 4000000000); create it, or change the task's user: not retried`},
	}
	if os.Geteuid() != 0 {
		cases = append(cases, struct{ user, want string }{"root",
			`user "root" (uid 0): the agent runs as uid ` + strconv.Itoa(os.Geteuid()) +
				`, not as root, so it cannot run a task as another user; run the agent as root or leave the task's user unset`})
	}
	for _, c := range cases {
		_, err := execdriver.New("exec").Start(context.Background(), driver.Task{
			Command: "true", Env: []string{testPATH}, Dir: "/", User: c.user,
		})
		if err == nil || err.Error() != c.want {
			t.Errorf("Start as %q: error %v, want %q", c.user, err, c.want)
		}
		// Starting again would fail the same way: no restarts.
		if c.user != "root" && !errors.Is(err, driver.ErrNoRetry) {
			t.Errorf("Start as %q: error is not ErrNoRetry", c.user)
		}
	}
}
