package execdriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/proc"
)

// detachAndAdopt lets go of a started task as an exiting agent does and
// takes it over again as the next agent does.
func detachAndAdopt(t *testing.T, h driver.Handle, stdout, stderr *syncBuffer) driver.Handle {
	t.Helper()
	h.(driver.Detacher).Detach()
	st, err := proc.ReadStat(h.PID())
	if err != nil {
		t.Fatal(err)
	}
	ah, err := execdriver.New("raw_exec").Adopt(context.Background(),
		driver.Process{PID: h.PID(), StartTicks: st.StartTicks}, stdout, stderr)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	return ah
}

func TestAdoptReattachesOutputWithoutLoss(t *testing.T) {
	t.Parallel()
	var out1, err1, out2, err2 syncBuffer
	h := start(t, `i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo out $i; echo err $i >&2; sleep 0.02; done; exit 4`, &out1, &err1)
	time.Sleep(150 * time.Millisecond)
	ah := detachAndAdopt(t, h, &out2, &err2)
	if ah.PID() != h.PID() {
		t.Fatalf("adopted pid %d, want %d", ah.PID(), h.PID())
	}
	if n, ok := ah.(interface{ Note() string }); !ok || n.Note() != "" {
		t.Errorf("note %q, want none: both outputs re-attached", n.Note())
	}
	e := waitExit(t, ah, 5*time.Second)
	// Its parent (this process, through h) reaps it: the status is known
	// only if the adopter looked first.
	if !e.Unknown && e.Code != 4 {
		t.Errorf("exit %v, want exit code 4 or unknown", e)
	}
	for _, c := range []struct {
		name       string
		before, at *syncBuffer
	}{{"out", &out1, &out2}, {"err", &err1, &err2}} {
		all := c.before.String() + c.at.String()
		var want strings.Builder
		for i := 1; i <= 30; i++ {
			want.WriteString(c.name + " " + itoa(i) + "\n")
		}
		if all != want.String() {
			t.Errorf("%s before detach %q + after adoption %q: want every line once, in order", c.name, c.before.String(), c.at.String())
		}
		if c.at.String() == "" {
			t.Errorf("%s: nothing read after adoption", c.name)
		}
	}
}

func TestAdoptedStopTerminatesGroup(t *testing.T) {
	t.Parallel()
	h := start(t, `sleep 1000 & sleep 1000 & wait`, nil, nil)
	pid := h.PID()
	waitFor(t, 5*time.Second, func() bool { return len(groupMembers(pid)) == 3 })
	ah := detachAndAdopt(t, h, nil, nil)
	e, err := ah.Stop(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !e.Unknown && e.Signal != "SIGTERM" {
		t.Errorf("exit %v, want killed by SIGTERM or unknown", e)
	}
	waitFor(t, 5*time.Second, func() bool { return len(groupMembers(pid)) == 0 })
}

func TestAdoptRefusesAnotherProcess(t *testing.T) {
	t.Parallel()
	h := start(t, `exec sleep 1000`, nil, nil)
	st, _ := proc.ReadStat(h.PID())
	// Same PID, another start time: a reused PID is never adopted.
	_, err := execdriver.New("raw_exec").Adopt(context.Background(),
		driver.Process{PID: h.PID(), StartTicks: st.StartTicks + 1}, nil, nil)
	if err == nil {
		t.Fatal("Adopt took a process whose start time does not match")
	}
}

func TestAdoptLeavesAlonePipesTheTaskReplaced(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	// stderr now goes into stdout's pipe: re-attaching it as stderr would
	// make two readers race for stdout's lines.
	h := start(t, `exec 2>&1; while :; do echo x; sleep 0.05; done`, nil, nil)
	time.Sleep(100 * time.Millisecond)
	ah := detachAndAdopt(t, h, &out, &errb)
	note := ah.(interface{ Note() string }).Note()
	if !strings.Contains(note, "stderr") || strings.Contains(note, "stdout") {
		t.Errorf("note %q, want stderr (only) not re-attached", note)
	}
	waitFor(t, 5*time.Second, func() bool { return strings.Contains(out.String(), "x\n") })
	ah.Stop(context.Background(), time.Second)
	if errb.String() != "" {
		t.Errorf("stderr got %q", errb.String())
	}
}

func TestUnknownExitIsAFailure(t *testing.T) {
	e := driver.Exit{Code: -1, Unknown: true}
	if e.Successful() {
		t.Error("an unknown exit counts as successful")
	}
	if got := e.String(); got != "exited (status unknown: adopted after an agent restart)" {
		t.Errorf("String() = %q", got)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
