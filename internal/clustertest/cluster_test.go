package clustertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestLeaderSIGKILL: SIGKILL the leader; the other server leads within a
// bounded time and schedules a new job; no instance is lost or duplicated.
func TestLeaderSIGKILL(t *testing.T) {
	c := startCluster(t, 2)
	c.submit(sleepJob("before", 4))
	c.waitRunning("before", 4, 30*time.Second)

	old, _ := c.waitLeader(nil, 10*time.Second)
	old.signal(syscall.SIGKILL)
	old.wait(10 * time.Second)
	leader, took := c.waitLeader(old, 15*time.Second)
	t.Logf("leader %s SIGKILLed; %s leads after %s (TTL %s)", old.name, leader.name, took.Round(time.Millisecond), leaderTTL)
	if took > 10*time.Second {
		t.Errorf("failover took %s, want <= 10s", took)
	}

	c.submit(sleepJob("after", 3))
	c.waitRunning("after", 3, 30*time.Second)
	c.waitRunning("before", 4, 30*time.Second)
	c.checkExactlyOnce("before", 4)
	c.checkExactlyOnce("after", 3)
}

// TestLeaderSIGSTOPPastTTL: a leader frozen past its TTL is deposed while
// jobs are submitted; thawed, it must not place anything stale, and it
// says it lost leadership.
func TestLeaderSIGSTOPPastTTL(t *testing.T) {
	c := startCluster(t, 2)
	old, _ := c.waitLeader(nil, 10*time.Second)
	old.signal(syscall.SIGSTOP)
	stopped := time.Now()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			old.cmd.Process.Signal(syscall.SIGCONT)
		}
	})

	// Submit while it is frozen, through the servers that still answer.
	jobs := map[string]int{}
	for i := 0; time.Since(stopped) < 3*leaderTTL; i++ {
		name := fmt.Sprintf("frozen%d", i)
		jobs[name] = 2
		c.submitVia(old, sleepJob(name, 2))
		time.Sleep(500 * time.Millisecond)
	}
	leader, _ := c.waitLeader(old, 15*time.Second)
	t.Logf("%s frozen for %s; %s leads", old.name, time.Since(stopped).Round(time.Millisecond), leader.name)
	old.signal(syscall.SIGCONT)
	thawed = true

	c.submit(sleepJob("thawed", 2))
	jobs["thawed"] = 2
	time.Sleep(3 * time.Second) // let the thawed server do whatever it would
	for name, n := range jobs {
		c.waitRunning(name, n, 30*time.Second)
	}
	for name, n := range jobs {
		c.checkExactlyOnce(name, n)
	}
	if l := c.leaderSeen(nil); l != leader.name {
		t.Errorf("leader after the thaw is %q, want %s still", l, leader.name)
	}
	waitFor(t, 10*time.Second, old.name+" logs that it lost leadership", func() bool {
		return strings.Contains(old.out.String(), "lost leadership")
	})
}

// submitVia submits through the running servers other than skip: a
// stopped process's kernel accepts connections, but it never answers.
func (c *cluster) submitVia(skip *proc, job *spec.Job) {
	c.t.Helper()
	var last error
	waitFor(c.t, 30*time.Second, "job "+job.Name+" submitted", func() bool {
		for _, p := range c.live() {
			if p == skip {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, last = p.client().SubmitJob(ctx, job, 0)
			cancel()
			if last == nil {
				return true
			}
		}
		return false
	})
}

// TestCleanShutdownHandsOverAtOnce: SIGTERM makes the leader resign, so
// another server leads well before the TTL would have run out.
func TestCleanShutdownHandsOverAtOnce(t *testing.T) {
	c := startCluster(t, 1)
	old, _ := c.waitLeader(nil, 10*time.Second)
	start := time.Now()
	old.signal(syscall.SIGTERM)
	leader, _ := c.waitLeader(old, 10*time.Second)
	took := time.Since(start)
	t.Logf("leader %s SIGTERMed; %s leads after %s (TTL %s)", old.name, leader.name, took.Round(time.Millisecond), leaderTTL)
	if took >= leaderTTL {
		t.Errorf("handover took %s, want well under the TTL %s (resign revokes the lease)", took, leaderTTL)
	}
	if err := old.wait(15 * time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v", old.name, err)
	}
	c.submit(sleepJob("handover", 2))
	c.waitRunning("handover", 2, 30*time.Second)
	c.checkExactlyOnce("handover", 2)
}

// TestAgentFailsOverBetweenServers: the server an agent talks to is
// killed; the agent moves to another and still gets new work.
func TestAgentFailsOverBetweenServers(t *testing.T) {
	c := startCluster(t, 0)
	// The agent's list starts at s2: it registers and waits through s2.
	ag := c.startAgent("a1", 1)
	c.waitNodes(30 * time.Second)
	c.submit(sleepJob("first", 2))
	c.waitRunning("first", 2, 30*time.Second)

	s2 := c.server("s2")
	s2.signal(syscall.SIGKILL)
	s2.wait(10 * time.Second)
	c.waitLeader(s2, 15*time.Second)

	c.submit(sleepJob("second", 2))
	st := c.waitRunning("second", 2, 30*time.Second)
	for _, a := range st.Allocations {
		if a.NodeID != c.nodeIDs[ag.name] {
			t.Errorf("alloc %s on node %s, want the agent's %s", a.Name, a.NodeName, ag.name)
		}
	}
	c.checkExactlyOnce("first", 2)
	c.checkExactlyOnce("second", 2)
	if !ag.running() {
		t.Fatalf("agent exited:\n%s", ag.out)
	}
}

// A server that accepts connections but never answers (SIGSTOP) is not
// caught by connection failures: the agent notices its heartbeats going
// unanswered and moves on, assignment query included.
func TestAgentLeavesAFrozenServer(t *testing.T) {
	c := startCluster(t, 0)
	ag := c.startAgent("a1", 1) // talks to s2 first
	c.waitNodes(30 * time.Second)
	s2 := c.server("s2")
	s2.signal(syscall.SIGSTOP)
	t.Cleanup(func() { s2.signal(syscall.SIGCONT) })
	c.waitLeader(s2, 15*time.Second)

	start := time.Now()
	c.submit(sleepJob("afterfreeze", 2))
	// Well inside the node TTL (5s) plus a placement: the agent must not
	// wait out its 5-minute query on the frozen server.
	st := c.waitRunning("afterfreeze", 2, 15*time.Second)
	t.Logf("job running on %s %s after s2 froze", ag.name, time.Since(start).Round(10*time.Millisecond))
	for _, a := range st.Allocations {
		if a.NodeID != c.nodeIDs[ag.name] {
			t.Errorf("alloc %s on node %s, want %s", a.Name, a.NodeName, ag.name)
		}
	}
	// The node never went down while its server was frozen.
	if st.Summary.Lost != 0 {
		t.Fatalf("instances lost while only a server froze: %+v", st.Summary)
	}
}

// TestAgentRegistersPastAFrozenServer: an agent that starts while the
// first server it lists is stopped (it accepts connections and answers
// nothing) registers through the next one: a registration that times
// out moves on, as a heartbeat does, instead of waiting on the same
// server at every retry.
func TestAgentRegistersPastAFrozenServer(t *testing.T) {
	c := startCluster(t, 0)
	s2 := c.server("s2")
	s2.signal(syscall.SIGSTOP)
	t.Cleanup(func() { s2.signal(syscall.SIGCONT) })
	c.waitLeader(s2, 15*time.Second)
	start := time.Now()
	c.startAgent("a1", 1) // talks to s2 first
	c.waitNodes(30 * time.Second)
	t.Logf("registered %s after it started, s2 frozen", time.Since(start).Round(10*time.Millisecond))
}

// outage is how long TestAllServersDownTasksKeepRunning keeps every server
// down: $DROVER_OUTAGE_SECONDS, default 30, as in the scenario.
func outage(t *testing.T) time.Duration {
	if s := os.Getenv("DROVER_OUTAGE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("DROVER_OUTAGE_SECONDS=%q: want a number of seconds", s)
		}
		return time.Duration(n) * time.Second
	}
	return 30 * time.Second
}

// TestAllServersDownTasksKeepRunning: every server (and with s1 the etcd)
// stops; the tasks keep running untouched; the servers come back on the
// same data and everything converges on the same allocs and processes.
func TestAllServersDownTasksKeepRunning(t *testing.T) {
	c := startCluster(t, 2)
	jobs := map[string]int{"keep1": 3, "keep2": 2}
	for name, n := range jobs {
		c.submit(sleepJob(name, n))
	}
	type inst struct {
		pid, restarts int
	}
	before := map[string]inst{} // alloc ID -> pid, restarts
	for name, n := range jobs {
		st := c.waitRunning(name, n, 30*time.Second)
		for _, a := range runningAllocs(st) {
			before[a.ID] = inst{a.Status.Tasks["t"].PID, a.Restarts()}
		}
	}

	down := outage(t)
	for _, name := range []string{"s3", "s2", "s1"} {
		p := c.server(name)
		p.signal(syscall.SIGTERM)
		if err := p.wait(30 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", name, err)
		}
	}
	t.Logf("every server down for %s", down)
	end := time.Now().Add(down)
	for time.Now().Before(end) {
		for id, in := range before {
			if !alive(in.pid) {
				t.Fatalf("alloc %s: task pid %d died while the servers were down", short(id), in.pid)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, ag := range c.agents {
		if !ag.running() {
			t.Fatalf("agent %s exited while the servers were down:\n%s", ag.name, ag.out)
		}
	}

	for _, p := range c.servers {
		p.start()
	}
	c.waitLeader(nil, 20*time.Second)
	for name, n := range jobs {
		waitFor(t, 60*time.Second, name+" converged on the same allocs and processes", func() bool {
			st, err := c.jobStatus(name)
			if err != nil {
				return false
			}
			run := runningAllocs(st)
			if len(run) != n || len(liveAllocs(st)) != n {
				return false
			}
			for _, a := range run {
				in, ok := before[a.ID]
				if !ok || a.Status.Tasks["t"].PID != in.pid {
					return false
				}
			}
			return true
		})
		st, _ := c.jobStatus(name)
		for _, a := range st.Allocations {
			if in := before[a.ID]; a.Restarts() != in.restarts {
				t.Errorf("alloc %s restarted across the outage: restarts %d -> %d", a.Name, in.restarts, a.Restarts())
			}
		}
		c.checkExactlyOnce(name, n)
	}
	for id, in := range before {
		if !alive(in.pid) {
			t.Errorf("alloc %s: task pid %d gone after the servers came back", short(id), in.pid)
		}
	}
}
