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
	ends       []time.Time // of each run that wrote STOP or EXIT, in order
	stopped    bool        // wrote STOP (told to stop)
	stopAt     time.Time
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
			a.stopped, a.stopAt = true, l.t
			a.ends = append(a.ends, l.t)
		case "EXIT":
			a.exited = true
			a.ends = append(a.ends, l.t)
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

// unconverged lists why the cluster is not yet as asked (nil: it is), and
// the jobs concerned: lost holds those whose acknowledged change is missing
// from etcd, notAsked every job any reason is about.
func (r *run) unconverged(seen map[string]*allocSeen, stored map[string]*spec.Job) (why []string, lost, notAsked map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lost, notAsked = map[string]bool{}, map[string]bool{}
	say := func(job string, format string, a ...any) {
		why, notAsked[job] = append(why, fmt.Sprintf(format, a...)), true
	}
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
				lost[name] = true
				say(name, "job %s: acknowledged at version %d, missing from etcd", name, rec.version)
				continue
			case st.Version < rec.version, st.Stopped != rec.stopped, st.Groups[0].Count != rec.count:
				lost[name] = true
				say(name, "job %s: etcd holds version %d (stopped %v, count %d); acknowledged version %d (stopped %v, count %d)",
					name, st.Version, st.Stopped, st.Groups[0].Count, rec.version, rec.stopped, rec.count)
				continue
			}
		}
		count, gen, stopped := r.want(rec, st)
		running := map[int]int{}
		done := map[int]bool{}
		for _, a := range byJob[name] {
			switch {
			case a.alive && a.waiting:
				say(name, "job %s: instance %d has a second task waiting for it", name, a.index)
			case a.alive && (stopped || a.index >= count || a.gen != gen):
				if !rec.batch || stopped {
					say(name, "job %s: instance %d (gen %d) still runs; wanted stopped %v, count %d, gen %d", name, a.index, a.gen, stopped, count, gen)
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
				say(name, "batch job %s: instance %d neither running nor complete", name, i)
			case !rec.batch && running[i] != 1:
				say(name, "job %s: instance %d runs %d times at gen %d", name, i, running[i], gen)
			}
		}
	}
	return why, lost, notAsked
}

// check waits for convergence after the last fault, then checks every
// invariant from the evidence.
func (r *run) check(ctx context.Context, etcd *clientv3.Client, healed time.Time) error {
	deadline := healed.Add(r.cfg.Converge)
	var (
		evs      []line
		live     map[string]int
		seen     map[string]*allocSeen
		why      []string
		lost     map[string]bool
		notAsked map[string]bool
		stored   map[string]*spec.Job
		err      error
	)
	for {
		if stored, err = storedJobs(ctx, etcd); err == nil {
			if evs, err = readEvidence(r.evidence); err != nil {
				return err
			}
			live = liveTasks(r.id)
			seen = observe(evs, live)
			why, lost, notAsked = r.unconverged(seen, stored)
			if len(why) == 0 {
				r.res.Converged, r.res.ConvergeMS = true, ms(time.Since(healed))
				break
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
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
	// A job not as asked when the bound passed is lost too.
	for job := range notAsked {
		lost[job] = true
	}
	r.res.Lost = len(lost)
	r.mu.Lock()
	for _, rec := range r.jobs {
		if rec.uncertain {
			r.res.Uncertain++
		}
	}
	r.mu.Unlock()
	if err := r.nodesDown(ctx); err != nil {
		return err
	}
	r.overlaps(evs, seen)
	r.batchReruns(seen)
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
			r.res.Overlaps++
			r.res.MaxOverlapMS = max(r.res.MaxOverlapMS, ms(d))
			r.res.Handovers++
			r.res.MaxHandoverMS = max(r.res.MaxHandoverMS, ms(d))
			r.res.problem("instance %s.%s[%d] ran twice for %s on an update: alloc %s (gen %d, node %s) started while alloc %s (gen %d, node %s) still ran",
				l.job, l.group, l.index, d.Round(time.Millisecond), l.alloc, l.gen, l.node, l.holder, l.holderGen, l.holderNode)
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
		for i, again := range a.starts[min(1, len(a.starts)):] {
			// The run before ended while its agent was down (its end
			// written, or, unwritten, found by the agent on its return).
			if (i < len(a.ends) && r.agentWasDown(a.node, a.ends[i])) || (i >= len(a.ends) && r.afterAgentKill(a.node, again)) {
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
		// When it stopped: its STOP line, or, for a task that died
		// without one, any time (what it is checked against is the
		// changes asked for before then).
		at := a.stopAt
		if !a.stopped {
			at = time.Now()
		}
		rec := r.jobs[a.job]
		if rec == nil || rec.explains(at, a.index, a.gen) || r.lostAgt[a.node] {
			continue
		}
		r.res.HealthyStopped++
		how := "was stopped at " + at.Format("15:04:05.000")
		if !a.stopped {
			how = "died without being told to stop"
		}
		r.res.problem("alloc %s (%s[%d], gen %d, node %s) %s though nothing asked for it before", id, a.job, a.index, a.gen, a.node, how)
	}
}

// batchReruns counts batch instances that more than one alloc ran: the
// suite never changes a batch job, so a second alloc means the leader
// placed again an instance it had placed (outside a lost node).
func (r *run) batchReruns(seen map[string]*allocSeen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	allocs := map[slotKey][]string{}
	for id, a := range seen {
		if rec := r.jobs[a.job]; rec != nil && rec.batch && !r.lostAgt[a.node] {
			k := slotKey{a.job, a.index}
			allocs[k] = append(allocs[k], id)
		}
	}
	for k, ids := range allocs {
		if len(ids) > 1 {
			r.res.BatchReruns++
			r.res.problem("batch instance %s[%d] ran in %d allocs: %v", k.job, k.index, len(ids), ids)
		}
	}
}

type slotKey struct {
	job   string
	index int
}

// nodesDown reads, from the cluster's history, which nodes were declared
// down during the run: what ran on them is counted apart.
func (r *run) nodesDown(ctx context.Context) error {
	evs, err := r.history(ctx, client.EventOptions{Topics: []string{string(spec.TopicNode)}})
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Type == spec.EventDown && !r.lostAgt[e.Node] {
			r.lostAgt[e.Node] = true
			r.res.NodesDown++
		}
	}
	return nil
}

// agentWasDown reports whether node's agent was down (killed, not yet
// back) at t, or was killed within a second after t: an agent reports
// status in batches, and one killed just after a task ended may not have
// told the servers, which then still count the task running; r.mu is
// held.
func (r *run) agentWasDown(node string, t time.Time) bool {
	for _, w := range r.agentDown[node] {
		if !t.Before(w[0].Add(-time.Second)) && !t.After(w[1].Add(time.Second)) {
			return true
		}
	}
	return false
}

// afterAgentKill reports whether t is while node's agent was down or
// within 5 s of its return; r.mu is held.
func (r *run) afterAgentKill(node string, t time.Time) bool {
	for _, w := range r.agentDown[node] {
		if !t.Before(w[0]) && !t.After(w[1].Add(5*time.Second)) {
			return true
		}
	}
	return false
}

// events checks the cluster's history against the evidence: every alloc
// whose task ran has its placement event and its task's start (or its
// adoption by an agent that came back), in that order, and a task that
// ended has the event of its end (Killed or Terminated for one told to
// stop, Completed or Terminated for one that exited). Agents report in
// batches, so a history that lacks something is read again for up to
// 15 s before it counts.
func (r *run) events(ctx context.Context, seen map[string]*allocSeen) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		evs, err := r.history(ctx, client.EventOptions{})
		if err != nil {
			return err
		}
		missing := missingEvents(evs, seen)
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.res.MissingEvents = len(missing)
			for _, m := range missing {
				r.res.problem("%s", m)
			}
			return nil
		}
		sleep(ctx, time.Second)
	}
}

// history reads the cluster's events since the run began, all of them:
// page after page, each after the last index the one before ended at
// (an answer holds at most about 10,000 events), retrying each for a
// while.
func (r *run) history(ctx context.Context, o client.EventOptions) ([]spec.Event, error) {
	o.Since = time.Since(r.began) + time.Minute
	o.After = 1 // every index is above: page from the start
	var all []spec.Event
	for {
		var page []spec.Event
		var err error
		for try := 0; try < 5; try++ {
			ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
			page, _, err = r.c.api.Events(ectx, o)
			cancel()
			if err == nil {
				break
			}
			sleep(ctx, time.Second)
		}
		if err != nil {
			return nil, fmt.Errorf("chaos: read the cluster's events after index %d: %w", o.After, err)
		}
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
		o.After = page[len(page)-1].Index
	}
}

// missingEvents says what the history evs lacks for the allocs seen.
func missingEvents(evs []spec.Event, seen map[string]*allocSeen) []string {
	type key struct {
		alloc string
		typ   spec.EventType
	}
	first := map[key]int64{} // the index of the first event of each (alloc, type)
	for _, e := range evs {
		k := key{e.AllocID, e.Type}
		if _, ok := first[k]; !ok && e.AllocID != "" {
			first[k] = e.Index
		}
	}
	at := func(id string, types ...spec.EventType) (int64, bool) {
		for _, t := range types {
			if i, ok := first[key{id, t}]; ok {
				return i, true
			}
		}
		return 0, false
	}
	var missing []string
	for _, id := range sortedKeys(seen) {
		a := seen[id]
		placed, okP := at(id, spec.EventPlaced)
		started, okS := at(id, spec.EventStarted, spec.EventAdopted)
		switch {
		case !okP:
			missing = append(missing, fmt.Sprintf("alloc %s (%s[%d]) ran but has no Placed event", id, a.job, a.index))
		case !okS:
			missing = append(missing, fmt.Sprintf("alloc %s (%s[%d]) ran but has no Started (or Adopted) event", id, a.job, a.index))
		case started < placed:
			missing = append(missing, fmt.Sprintf("alloc %s (%s[%d]): Started (index %d) before Placed (index %d)", id, a.job, a.index, started, placed))
		}
		if a.alive {
			continue
		}
		switch {
		case a.stopped:
			if _, ok := at(id, spec.EventKilled, spec.EventTerminated); !ok {
				missing = append(missing, fmt.Sprintf("alloc %s (%s[%d]) was stopped but has no Killed or Terminated event", id, a.job, a.index))
			}
		case a.exited:
			if _, ok := at(id, spec.EventCompleted, spec.EventTerminated); !ok {
				missing = append(missing, fmt.Sprintf("alloc %s (%s[%d]) exited but has no Completed or Terminated event", id, a.job, a.index))
			}
		}
	}
	return missing
}
