package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestEventsFollowAJobsLife: `drover events -f` (a real stream from a real
// dev) shows a job's submit, its placement, its task's start, a SIGKILL of
// the task's process and the restart, and the stop, in that order; the
// history (`drover events --job`) holds the same afterwards.
func TestEventsFollowAJobsLife(t *testing.T) {
	d := startDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, droverBin, "events", "-f", "--job", "life", "-o", "json")
	follow.Env = append(os.Environ(), "DROVER_ADDR="+d.addr)
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { follow.Process.Kill(); follow.Wait() }()
	got := make(chan spec.Event, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e spec.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				got <- e
			}
		}
		close(got)
	}()
	// waitEvent reads the stream until an event of typ comes (at most 30 s).
	var seen []spec.Event
	waitEvent := func(typ spec.EventType) spec.Event {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case e, ok := <-got:
				if !ok {
					t.Fatalf("the stream ended before a %s event; saw %+v", typ, seen)
				}
				seen = append(seen, e)
				if e.Type == typ {
					return e
				}
			case <-timeout:
				t.Fatalf("no %s event within 30s; saw %+v", typ, seen)
			}
		}
	}

	file := sleepJob(t, "life", `    restart {
      attempts = 3
      interval = "1m"
      delay    = "1s"
    }
`)
	time.Sleep(500 * time.Millisecond) // the stream is open before the submit
	if _, stderr, code := d.cli("", "run", "--detach", file); code != 0 {
		t.Fatalf("drover run: %s", stderr)
	}
	sub := waitEvent("Submitted")
	placed := waitEvent("Placed")
	started := waitEvent(spec.EventStarted)
	if !(sub.Index < placed.Index && placed.Index < started.Index) {
		t.Errorf("indexes out of order: submitted %d, placed %d, started %d", sub.Index, placed.Index, started.Index)
	}
	if placed.Node == "" || placed.Alloc != "life.g[0]" || started.Task != "t" {
		t.Errorf("placed %+v, started %+v: missing subject", placed, started)
	}

	st := d.jobStatus("life")
	pid := st.Allocations[0].Status.Tasks["t"].PID
	if pid == 0 {
		t.Fatalf("no pid for the task: %+v", st.Allocations[0].Status)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	term := waitEvent(spec.EventTerminated)
	if !strings.Contains(term.Message, "SIGKILL") {
		t.Errorf("terminated event does not say SIGKILL: %+v", term)
	}
	waitEvent(spec.EventRestarting)
	t.Logf("SIGKILL -> Terminated event on the stream: %s", time.Since(killed).Round(time.Millisecond))
	if _, stderr, code := d.cli("", "stop", "life"); code != 0 {
		t.Fatalf("drover stop: %s", stderr)
	}
	stopped := waitEvent("Stopped")
	stopping := waitEvent("Stopping")
	if stopped.Index >= stopping.Index {
		t.Errorf("the job's Stopped (index %d) came after the leader's Stopping (index %d)", stopped.Index, stopping.Index)
	}

	// The history holds what the stream showed.
	out, stderr, code := d.cli("", "events", "--job", "life", "--since", "1h")
	if code != 0 {
		t.Fatalf("drover events: %s", stderr)
	}
	for _, want := range []string{"Submitted", "Placed", "Started", "Terminated", "Restarting", "Stopped", "life.g[0]/t"} {
		if !strings.Contains(out, want) {
			t.Errorf("drover events --job life lacks %q:\n%s", want, out)
		}
	}
	if _, stderr, code := d.cli("", "events", "--topic", "nope"); code == 0 || !strings.Contains(stderr, "unknown topic") {
		t.Errorf("an unknown topic: exit %d, %s", code, stderr)
	}
}
