package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// newNodeCmd is `drover node`: what an operator does to one machine.
// `drover nodes` lists them.
func newNodeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Drain a machine, or take it out of scheduling (drover nodes lists them)",
		Example: `  drover node drain node-a --deadline 1h
  drover node drain node-a --disable
  drover node eligibility node-a off`,
	}
	cmd.AddCommand(newNodeDrainCmd(g), newNodeEligibilityCmd(g), newNodeStatusCmd(g))
	return cmd
}

func newNodeEligibilityCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "eligibility NODE on|off",
		Short: "Let the scheduler place new work on a machine, or not",
		Long: `Eligibility says whether the scheduler places new instances on the node.
An ineligible node keeps running what it runs (drover node drain moves that
elsewhere). NODE is a node ID, a unique ID prefix or a name. A draining node
cannot be made eligible: end its drain (drover node drain --disable NODE).`,
		Example: "  drover node eligibility node-a off\n  drover node eligibility node-a on",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var eligible bool
			switch args[1] {
			case "on":
				eligible = true
			case "off":
			default:
				return fmt.Errorf("eligibility is on or off, got %q", args[1])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
			defer cancel()
			n, err := c.SetNodeEligibility(ctx, args[0], eligible)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), n)
			}
			fmt.Fprintln(cmd.OutOrStdout(), eligibilityLine(n))
			return nil
		},
	}, documents...)
}

// eligibilityLine says what a node's eligibility now means.
func eligibilityLine(n *spec.Node) string {
	who := fmt.Sprintf("Node %s (%s)", n.Name, short(n.ID))
	switch {
	case n.Drain != nil:
		return who + " is draining: it takes no new work, and its work is moving elsewhere."
	case n.Ineligible:
		return who + " is ineligible: no new work is placed on it; what runs there keeps running."
	}
	return who + " is eligible: the scheduler may place new work on it."
}

func newNodeDrainCmd(g *globals) *cobra.Command {
	var (
		deadline       time.Duration
		detach         bool
		disable        bool
		keepIneligible bool
		ignoreSystem   bool
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Move a machine's work elsewhere, and follow until it is done",
		Long: `Drain takes the node out of scheduling and moves its instances to other
nodes, each group's update max_parallel at a time (1 without an update
block), each replacement healthy before the next moves. Batch instances
finish where they are; system jobs' instances stop once nothing else is
left (--ignore-system leaves them running). At the deadline (--deadline; none by default) whatever is left is
stopped. Draining a draining node again changes its deadline.

It then follows the node's instances, one line per change, until none but
system jobs' is left, or the deadline passes (--detach returns at once).
--disable ends a drain: the node is eligible again unless --keep-ineligible.

NODE is a node ID, a unique ID prefix or a name.

Exit status: 0 drained (or the deadline passed, or --detach/--disable);
1 the drain was ended by someone else, or --timeout passed (the drain keeps
going: drover nodes).`,
		Example: `  drover node drain node-a
  drover node drain node-a --deadline 1h --detach
  drover node drain node-a --ignore-system
  drover node drain node-a --disable --keep-ineligible`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if disable && (deadline != 0 || detach || ignoreSystem) {
				return errors.New("--disable ends a drain: --deadline, --detach and --ignore-system do not go with it")
			}
			if keepIneligible && !disable {
				return errors.New("--keep-ineligible goes with --disable: a draining node takes no new work anyway")
			}
			if deadline < 0 || timeout < 0 {
				return errors.New("--deadline and --timeout must not be negative")
			}
			if g.output != "table" && !disable && !detach {
				return fmt.Errorf("-o %s goes with --detach or --disable (it prints the node); a drain that is followed prints a line per change", g.output)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			rctx, rcancel := context.WithTimeout(cmd.Context(), readTimeout)
			n, err := c.DrainNode(rctx, args[0], !disable, client.DrainOptions{Deadline: deadline, KeepIneligible: keepIneligible, IgnoreSystemJobs: ignoreSystem})
			rcancel()
			if err != nil {
				return err
			}
			if g.output != "table" && (disable || detach) {
				return g.print(out, n)
			}
			if disable {
				fmt.Fprintln(out, eligibilityLine(n))
				return nil
			}
			fmt.Fprintln(out, drainStartLine(n, time.Now()))
			if detach {
				fmt.Fprintf(out, "Follow it with: drover nodes (STATUS), drover ps\n")
				return nil
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return followDrain(ctx, c, out, n)
		},
	}
	cmd.Flags().DurationVar(&deadline, "deadline", 0, "stop whatever is left on the node after this long (0: no deadline)")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return once the drain started, without following")
	cmd.Flags().BoolVar(&disable, "disable", false, "end the node's drain; the node is eligible again")
	cmd.Flags().BoolVar(&keepIneligible, "keep-ineligible", false, "with --disable: leave the node ineligible for new work")
	cmd.Flags().BoolVar(&ignoreSystem, "ignore-system", false, "leave the node's system jobs' instances running (they stop once nothing else is left, without it)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "stop following after this long (0: until drained or the deadline; the drain keeps going)")
	return outputs(cmd, documents...)
}

// drainStartLine says that a node is draining, and until when.
func drainStartLine(n *spec.Node, now time.Time) string {
	s := fmt.Sprintf("Node %s (%s) is draining since %s", n.Name, short(n.ID), n.Drain.StartedAt.UTC().Format(time.RFC3339))
	if d := n.Drain.Deadline; !d.IsZero() {
		return s + fmt.Sprintf("; deadline %s (in %s).", d.UTC().Format(time.RFC3339), d.Sub(now).Round(time.Second))
	}
	return s + "; no deadline."
}

// drainQueryWait bounds each blocking query while following a drain; the
// call's context gives it drainQuerySlack more to answer.
const (
	drainQueryWait  = time.Minute
	drainQuerySlack = 30 * time.Second
)

// followDrain follows the allocs of node n with blocking queries, and
// the replacements of those that leave it, printing one timestamped line
// per change (drainWatch), until no instance but system jobs' is live on
// the node, the drain's deadline passes, the drain ends, or ctx ends.
func followDrain(ctx context.Context, c *client.Client, out io.Writer, n *spec.Node) error {
	w := newDrainWatch(n)
	deadline := n.Drain.Deadline
	print := func(lines []string) {
		for _, l := range lines {
			fmt.Fprintf(out, "%s  %s\n", time.Now().UTC().Format(time.RFC3339), l)
		}
	}
	stopped := func() error {
		if ctx.Err() != nil {
			return &exitError{code: exitFailure, err: fmt.Errorf(
				"stopped following the drain of node %s (%s); it keeps going: drover nodes, drover ps", n.Name, w.progress())}
		}
		return nil
	}
	var index int64
	var emptied time.Time // when nothing was left to move off the node
	for {
		wait := drainQueryWait
		if !emptied.IsZero() {
			wait = time.Second // only the replacements are left to see
		}
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				fmt.Fprintln(out, w.deadlineLine())
				return nil
			}
			wait = max(min(wait, left), time.Second)
		}
		qctx, cancel := context.WithTimeout(ctx, wait+drainQuerySlack)
		allocs, idx, err := c.Allocs(qctx, "", n.ID, &client.QueryOptions{Index: index, Wait: wait})
		cancel()
		if err != nil {
			if e := stopped(); e != nil {
				return e
			}
			return err
		}
		index = idx
		lines, done := w.onNode(allocs)
		print(lines)
		// The replacements of what left, on other nodes (once more when
		// done: the last of them may have been placed just now).
		for _, job := range w.following() {
			rctx, rcancel := context.WithTimeout(ctx, readTimeout)
			as, _, err := c.Allocs(rctx, job, "", nil)
			rcancel()
			if err != nil {
				if e := stopped(); e != nil {
					return e
				}
				return err
			}
			print(w.elsewhere(as))
		}
		// Complete once the node is empty and the replacements run; the
		// ones that cannot be placed (or start) are not waited on long.
		if done && emptied.IsZero() {
			emptied = time.Now()
		}
		if done && (len(w.following()) == 0 || time.Since(emptied) > drainSettleWait) {
			fmt.Fprintln(out, w.doneLine())
			return nil
		}
		if done {
			continue
		}
		// Someone may have ended the drain, or changed its deadline.
		rctx, rcancel := context.WithTimeout(ctx, readTimeout)
		cur, err := c.Node(rctx, n.ID)
		rcancel()
		if err != nil {
			if e := stopped(); e != nil {
				return e
			}
			return err
		}
		if cur.Drain == nil {
			return &exitError{code: exitFailure, err: fmt.Errorf(
				"the drain of node %s was ended (drover node drain --disable) with %s", n.Name, w.progress())}
		}
		deadline = cur.Drain.Deadline
	}
}

// drainWatch is what following a drain has seen: the pure part of
// followDrain, so that its lines can be tested. Lines read
//
//	node-a: 3 instances to move; 1 instance of system jobs stop last
//	web.api[1] stopping on node-a: node node-a is draining
//	web.api[1] stopped on node-a: node node-a is draining
//	web.api[1] placed on node-b
//	web.api[1] running on node-b
type drainWatch struct {
	node, name string
	first      bool
	// said is, by alloc ID, the state last printed.
	said map[string]string
	// live are the instances of other than system jobs seen live on the
	// node (their last live value), by alloc ID; left those among them
	// that are no longer live there; settled those whose replacement
	// runs.
	live, left map[string]*spec.Alloc
	settled    map[string]bool
}

func newDrainWatch(n *spec.Node) *drainWatch {
	return &drainWatch{node: n.ID, name: n.Name, first: true, said: map[string]string{},
		live: map[string]*spec.Alloc{}, left: map[string]*spec.Alloc{}, settled: map[string]bool{}}
}

// onNode takes the allocs on the node and returns the lines for what
// changed, and whether the drain is done: nothing live left but system
// jobs' instances (they stop last, on their own). The first call only
// counts what there is to move.
func (w *drainWatch) onNode(allocs []*spec.Alloc) (lines []string, done bool) {
	var move, system int
	for _, a := range allocs {
		if a.NodeID != w.node {
			continue
		}
		live := !a.Terminal()
		switch {
		case live && a.JobType.PerNode():
			system++
		case live:
			move++
			w.live[a.ID] = a
		case w.live[a.ID] != nil:
			w.left[a.ID] = w.live[a.ID]
		}
		state, line := w.stateOnNode(a)
		if w.said[a.ID] == state {
			continue
		}
		w.said[a.ID] = state
		if w.first && (state == "run" || !live) {
			continue // what was there, or long gone, when the drain started
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	if w.first {
		w.first = false
		head := fmt.Sprintf("%s: %s to move", w.name, plural(move, "instance"))
		if system > 0 {
			head += fmt.Sprintf("; %s of system jobs stop last", plural(system, "instance"))
		}
		lines = append([]string{head}, lines...)
	}
	return lines, move == 0
}

// stateOnNode is an alloc's state on the drained node and the line that
// announces it ("" for one that runs on).
func (w *drainWatch) stateOnNode(a *spec.Alloc) (state, line string) {
	why := ""
	if a.DesiredReason != "" {
		why = ": " + a.DesiredReason
	}
	switch {
	case a.Terminal() && a.DesiredStatus == spec.DesiredStop:
		state = "stopped"
	case a.Terminal():
		state, why = string(a.ClientStatusOr()), statusWhy(a)
	case a.DesiredStatus == spec.DesiredStop:
		state = "stopping"
	default:
		return "run", ""
	}
	return state, fmt.Sprintf("%s %s on %s%s", a.Name, state, w.name, why)
}

func statusWhy(a *spec.Alloc) string {
	if a.Status != nil && a.Status.Description != "" {
		return ": " + a.Status.Description
	}
	return ""
}

// moving reports whether instance a (of live) is leaving the node: told
// to stop, or gone.
func (w *drainWatch) moving(a *spec.Alloc) bool {
	return a.DesiredStatus == spec.DesiredStop || w.left[a.ID] != nil
}

// following are the jobs with instances leaving the node whose
// replacement does not run yet, in name order: whose allocs elsewhere to
// look at.
func (w *drainWatch) following() []string {
	var jobs []string
	for id, a := range w.live {
		if w.moving(a) && !w.settled[id] && !slices.Contains(jobs, a.Job) {
			jobs = append(jobs, a.Job)
		}
	}
	slices.Sort(jobs)
	return jobs
}

// elsewhere takes a job's allocs and returns the lines for replacements
// of the instances leaving the node: the same instance, on another node,
// created after the one that leaves.
func (w *drainWatch) elsewhere(allocs []*spec.Alloc) []string {
	var lines []string
	for _, a := range allocs {
		old := w.replaced(a)
		if old == nil {
			continue
		}
		var state string
		switch {
		case a.Terminal():
			state = string(a.ClientStatusOr())
		case a.DesiredStatus != spec.DesiredRun:
			continue
		case a.ClientStatusOr() == spec.ClientRunning:
			state = "running"
			w.settled[old.ID] = true
		default:
			state = "placed"
		}
		if w.said[a.ID] == state {
			continue
		}
		w.said[a.ID] = state
		line := fmt.Sprintf("%s %s on %s", a.Name, state, dash(a.NodeName))
		if a.Terminal() {
			line += statusWhy(a)
		}
		lines = append(lines, line)
	}
	return lines
}

// replaced returns the instance leaving the node that a, elsewhere,
// replaces, or nil.
func (w *drainWatch) replaced(a *spec.Alloc) *spec.Alloc {
	if a.NodeID == w.node {
		return nil
	}
	for _, old := range w.live {
		if old.Job == a.Job && old.Name == a.Name && a.CreateIndex > old.CreateIndex && w.moving(old) {
			return old
		}
	}
	return nil
}

// progress is how far the drain got.
func (w *drainWatch) progress() string {
	return fmt.Sprintf("%s moved, %s left", plural(len(w.left), "instance"), plural(len(w.live)-len(w.left), "instance"))
}

func (w *drainWatch) doneLine() string {
	line := fmt.Sprintf("✓ drain of %s complete: %s moved", w.name, plural(len(w.left), "instance"))
	n := 0
	for id, a := range w.live {
		if w.moving(a) && !w.settled[id] {
			n++
		}
	}
	if n > 0 {
		line += fmt.Sprintf("; %s not running elsewhere (drover ps)", plural(n, "replacement"))
	}
	return line
}

// drainSettleWait is how long a drain that emptied its node waits for the
// replacements to run before it says it is complete.
const drainSettleWait = 30 * time.Second

func (w *drainWatch) deadlineLine() string {
	return fmt.Sprintf("drain deadline of %s reached: %s moved; what is left is being stopped (%s)",
		w.name, plural(len(w.left), "instance"), plural(len(w.live)-len(w.left), "instance"))
}

// nodeStatus is a node's STATUS in `drover nodes`: "ready", "down", and
// whether an operator took it out of scheduling ("ready, draining",
// "ready, ineligible").
func nodeStatus(n *spec.Node) string {
	s := string(n.Status)
	switch {
	case n.Drain != nil:
		s += ", draining"
	case n.Ineligible:
		s += ", ineligible"
	}
	return s
}

// plural is "1 instance", "3 instances".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
