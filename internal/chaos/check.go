package chaos

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// allocSeen is one alloc as its task's evidence and the process table
// show it.
type allocSeen struct {
	job        string
	index, gen int
	node       string
	starts     []time.Time
	stopped    bool // wrote STOP (told to stop)
	exited     bool // wrote EXIT (a batch task done)
	waiting    bool // wrote WAIT and not OVERLAP: blocked on its instance's lock
	alive      bool
	firstStart time.Time
}

// observe folds the evidence and the live processes into allocs.
func observe(evs []line, live map[string]int) map[string]*allocSeen {
	seen := map[string]*allocSeen{}
	for _, l := range evs {
		a := seen[l.alloc]
		if a == nil {
			a = &allocSeen{job: l.job, index: l.index, gen: l.gen, node: l.node, firstStart: l.t}
			seen[l.alloc] = a
		}
		switch l.kind {
		case "START":
			a.starts = append(a.starts, l.t)
		case "WAIT":
			a.waiting = true
		case "OVERLAP":
			a.waiting = false
		case "STOP":
			a.stopped = true
		case "EXIT":
			a.exited = true
		}
	}
	for id := range live {
		if a := seen[id]; a != nil {
			a.alive = true
		}
	}
	return seen
}

// want is what a job should be at the end: what was acknowledged, or,
// for a job whose last operations went unanswered, what etcd holds.
func (r *run) want(rec *jobRecord, stored *spec.Job) (count, gen int, stopped bool) {
	if !rec.uncertain || stored == nil {
		return rec.count, rec.gen, rec.stopped
	}
	g := stored.Groups[0]
	gen, _ = strconv.Atoi(g.Tasks[0].Env["CHAOS_GEN"])
	return g.Count, gen, stored.Stopped
}

// unconverged lists why the cluster is not yet as asked (nil: it is).
// lost marks the reasons that are an acknowledged change missing from etcd.
func (r *run) unconverged(seen map[string]*allocSeen, stored map[string]*spec.Job) (why []string, lost map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lost = map[string]bool{}
	byJob := map[string][]*allocSeen{}
	for _, a := range seen {
		byJob[a.job] = append(byJob[a.job], a)
	}
	for _, name := range r.order {
		rec := r.jobs[name]
		st := stored[name]
		if rec.version == 0 && st == nil {
			continue // never acknowledged and not stored: never submitted
		}
		if rec.version > 0 && !rec.uncertain {
			switch {
			case st == nil:
				why, lost[name] = append(why, fmt.Sprintf("job %s: acknowledged at version %d, missing from etcd", name, rec.version)), true
				continue
			case st.Version < rec.version, st.Stopped != rec.stopped, st.Groups[0].Count != rec.count:
				why, lost[name] = append(why, fmt.Sprintf("job %s: etcd holds version %d (stopped %v, count %d); acknowledged version %d (stopped %v, count %d)",
					name, st.Version, st.Stopped, st.Groups[0].Count, rec.version, rec.stopped, rec.count)), true
				continue
			}
		}
		count, gen, stopped := r.want(rec, st)
		running := map[int]int{}
		done := map[int]bool{}
		for _, a := range byJob[name] {
			switch {
			case a.alive && a.waiting:
				why = append(why, fmt.Sprintf("job %s: instance %d has a second task waiting for it", name, a.index))
			case a.alive && (stopped || a.index >= count || a.gen != gen):
				if !rec.batch || stopped {
					why = append(why, fmt.Sprintf("job %s: instance %d (gen %d) still runs; wanted stopped %v, count %d, gen %d", name, a.index, a.gen, stopped, count, gen))
				}
			case a.alive:
				running[a.index]++
			case a.exited:
				done[a.index] = true
			}
		}
		if stopped {
			continue
		}
		for i := range count {
			switch {
			case rec.batch && !done[i] && running[i] == 0:
				why = append(why, fmt.Sprintf("batch job %s: instance %d neither running nor complete", name, i))
			case !rec.batch && running[i] != 1:
				why = append(why, fmt.Sprintf("job %s: instance %d runs %d times at gen %d", name, i, running[i], gen))
			}
		}
	}
	return why, lost
}

// check waits for convergence after the last fault, then checks every
// invariant from the evidence.
func (r *run) check(ctx context.Context, etcd *clientv3.Client, healed time.Time) error {
	deadline := healed.Add(r.cfg.Converge)
	var (
		evs    []line
		live   map[string]int
		seen   map[string]*allocSeen
		why    []string
		lost   map[string]bool
		stored map[string]*spec.Job
		err    error
	)
	for {
		if stored, err = storedJobs(ctx, etcd); err == nil {
			if evs, err = readEvidence(r.evidence); err != nil {
				return err
			}
			live = liveTasks(r.id)
			seen = observe(evs, live)
			why, lost = r.unconverged(seen, stored)
			if len(why) == 0 {
				r.res.Converged, r.res.ConvergeMS = true, ms(time.Since(healed))
				break
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("chaos: cannot read etcd after the faults: %w", err)
			}
			for _, w := range why {
				r.res.problem("not converged %s after the last fault: %s", r.cfg.Converge, w)
			}
			r.res.ConvergeMS = ms(time.Since(healed))
			break
		}
		sleep(ctx, 250*time.Millisecond)
	}
	r.res.Lost = len(lost)
	if !r.res.Converged {
		// A job not as asked when the bound passed is lost too.
		notAsked := map[string]bool{}
		for _, w := range why {
			notAsked[w] = true
		}
		r.res.Lost = max(r.res.Lost, len(notAsked))
	}
	r.overlaps(evs, seen)
	r.healthy(seen)
	return r.events(ctx, seen)
}

// overlaps counts instances that ran twice at once, from the tasks' locks.
func (r *run) overlaps(evs []line, seen map[string]*allocSeen) {
	ended := map[string]time.Duration{}
	for _, l := range evs {
		if l.kind == "OVERLAP" {
			ended[l.alloc] = l.waited
		}
	}
	now := time.Now()
	for _, l := range evs {
		if l.kind != "WAIT" {
			continue
		}
		d, ok := ended[l.alloc]
		if !ok && seen[l.alloc].alive {
			d = now.Sub(l.t) // still waiting
		}
		holderGen := l.holderGen
		if l.holder == "-" {
			holderGen = -1
		}
		switch {
		case r.lostAgt[l.holderNode]:
			r.res.OverlapsLostNode++
		case holderGen >= 0 && holderGen < l.gen:
			r.res.Handovers++
			r.res.MaxHandoverMS = max(r.res.MaxHandoverMS, ms(d))
		default:
			r.res.Overlaps++
			r.res.MaxOverlapMS = max(r.res.MaxOverlapMS, ms(d))
			r.res.problem("instance %s.%s[%d] ran twice for %s: alloc %s (gen %d, node %s) started while alloc %s (gen %d, node %s) held it",
				l.job, l.group, l.index, d.Round(time.Millisecond), l.alloc, l.gen, l.node, l.holder, l.holderGen, l.holderNode)
		}
	}
}

// healthy counts tasks restarted or stopped that nothing the suite asked
// for explains: a control-plane fault must not touch a healthy task.
func (r *run) healthy(seen map[string]*allocSeen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, a := range seen {
		r.res.TasksStarted += len(a.starts)
		for _, again := range a.starts[min(1, len(a.starts)):] {
			if r.afterAgentKill(a.node, again) {
				r.res.RestartedAfterAgentKill++
				continue
			}
			r.res.HealthyRestart++
			r.res.problem("alloc %s (%s[%d], node %s) started again at %s", id, a.job, a.index, a.node, again.Format("15:04:05.000"))
		}
		ended := a.stopped || (!a.alive && !a.exited)
		if !ended || a.waiting {
			continue
		}
		rec := r.jobs[a.job]
		explained := rec == nil || rec.triedStop || a.index >= rec.minCount || a.gen < rec.maxGen || r.lostAgt[a.node]
		if !explained {
			r.res.HealthyStopped++
			how := "was stopped"
			if !a.stopped {
				how = "died without being told to stop"
			}
			r.res.problem("alloc %s (%s[%d], gen %d, node %s) %s though nothing asked for it", id, a.job, a.index, a.gen, a.node, how)
		}
	}
}

// afterAgentKill reports whether t is while node's agent was down or
// within 15 s of its return (an agent under load may take that long to
// hear from a server); r.mu is held.
func (r *run) afterAgentKill(node string, t time.Time) bool {
	for _, w := range r.agentDown[node] {
		if !t.Before(w[0]) && !t.After(w[1].Add(15*time.Second)) {
			return true
		}
	}
	return false
}

// events checks the cluster's history against the evidence: every alloc
// whose task ran has its placement event and its task's start (or its
// adoption by an agent that came back), in that order.
func (r *run) events(ctx context.Context, seen map[string]*allocSeen) error {
	byJob := map[string][]string{}
	for id, a := range seen {
		byJob[a.job] = append(byJob[a.job], id)
	}
	for _, job := range sortedKeys(byJob) {
		var evs []spec.Event
		var err error
		for try := 0; try < 5; try++ {
			ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
			evs, _, err = r.c.api.Events(ectx, client.EventOptions{Job: job})
			cancel()
			if err == nil {
				break
			}
			sleep(ctx, time.Second)
		}
		if err != nil {
			return fmt.Errorf("chaos: read the events of %s: %w", job, err)
		}
		placed, started := map[string]int64{}, map[string]int64{}
		for _, e := range evs {
			switch {
			case e.Type == "Placed" && placed[e.AllocID] == 0:
				placed[e.AllocID] = e.Index
			case (e.Type == "Started" || e.Type == "Adopted") && started[e.AllocID] == 0:
				// Adopted: the task started while its agent was being
				// killed, before the agent told anyone; the agent that
				// came back found it running and said so.
				started[e.AllocID] = e.Index
			}
		}
		for _, id := range byJob[job] {
			a := seen[id]
			p, s := placed[id], started[id]
			switch {
			case p == 0:
				r.res.MissingEvents++
				r.res.problem("alloc %s (%s[%d]) ran but has no Placed event", id, job, a.index)
			case s == 0:
				r.res.MissingEvents++
				r.res.problem("alloc %s (%s[%d]) ran but has no Started (or Adopted) event", id, job, a.index)
			case s < p:
				r.res.MissingEvents++
				r.res.problem("alloc %s (%s[%d]): Started (index %d) before Placed (index %d)", id, job, a.index, s, p)
			}
		}
	}
	return nil
}
