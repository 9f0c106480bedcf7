package main

// drover-bench chaos: the fault-injection suite (internal/chaos) at any
// size, on the embedded etcd, on Debian's etcd (three members), or both.
//
//	go run ./cmd/drover-bench chaos                        # full: 25 rounds (50 leader faults), 1,000 submissions, each etcd kind
//	go run ./cmd/drover-bench chaos -rounds 1 -submissions 30   # CI's size (go test ./internal/chaos runs it)
//
// Each round SIGKILLs the leader, SIGSTOPs it past its lease, SIGKILLs an
// agent, cuts the leader off from etcd, kills an etcd follower and the
// etcd leader (external), and takes etcd's quorum away, while jobs are
// submitted, updated, scaled and stopped and a writer of its own keys
// loads the same etcd. The invariants are checked from the tasks' own
// evidence, the process table and etcd read directly; the exit code is 1
// when one is violated.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/chaos"
)

func init() {
	register(scenario{name: "chaos", heavy: true,
		about: "fault injection: leader, agent and etcd kills, pauses and partitions under load; no instance runs twice, nothing acknowledged is lost",
		flags: chaosFlags})
}

func chaosFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	kinds := fs.String("etcd", "both", "etcd to run on: embedded, external (Debian's /usr/bin/etcd, three members) or both")
	rounds := fs.Int("rounds", 25, "rounds of faults; each has a leader kill and a leader pause (-quick: 1)")
	subs := fs.Int("submissions", 1000, "jobs submitted per etcd kind (-quick: 30)")
	agents := fs.Int("agents", 5, "agents (-quick: 3)")
	rate := fs.Float64("rate", 3, "operations (submit, update, scale, stop) per second; half or more are submissions")
	foreign := fs.Int("foreign-writes", 200, "writes per second of keys outside drover's prefix on the same etcd")
	seed := fs.Uint64("seed", 0, "random seed (0: from the clock; printed)")
	keep := fs.String("keep", "", "keep every process's log and the evidence in this directory")
	return func() (*report, error) {
		var list []string
		switch *kinds {
		case "both":
			list = []string{chaos.EtcdEmbedded, chaos.EtcdExternal}
		case chaos.EtcdEmbedded, chaos.EtcdExternal:
			list = []string{*kinds}
		default:
			return nil, fmt.Errorf("-etcd %q: want embedded, external or both", *kinds)
		}
		tmp, err := os.MkdirTemp("", "drover-bench-chaos-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		bin, err := droverBinary(o.drover, tmp)
		if err != nil {
			return nil, err
		}
		task := filepath.Join(tmp, "chaostask")
		if out, err := exec.Command("go", "build", "-o", task, "./internal/chaos/chaostask").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building chaostask (run from the module root): %v\n%s", err, out)
		}
		if *seed == 0 {
			*seed = uint64(time.Now().UnixNano())
		}
		rep := newReport("chaos")
		rep.linef("drover-bench chaos: %d rounds of faults, %d submissions at %.0f ops/s, %d agents, %d foreign writes/s, seed %d, %d CPUs, %s/%s",
			sized(fs, o, "rounds", *rounds, 1), sized(fs, o, "submissions", *subs, 30), *rate, sized(fs, o, "agents", *agents, 3), *foreign, *seed,
			runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
		for _, kind := range list {
			cfg := chaos.Config{Drover: bin, Task: task, Etcd: kind, EtcdBin: "/usr/bin/etcd",
				Agents: sized(fs, o, "agents", *agents, 3), Submissions: sized(fs, o, "submissions", *subs, 30),
				Rounds: sized(fs, o, "rounds", *rounds, 1), Rate: *rate, ForeignWrites: *foreign, Seed: *seed, Log: os.Stderr}
			if kind == chaos.EtcdExternal {
				if err := need(cfg.EtcdBin); err != nil {
					return nil, err
				}
			}
			if *keep != "" {
				cfg.Dir = filepath.Join(*keep, kind)
				if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
					return nil, err
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Rounds)*3*time.Minute+10*time.Minute)
			res, err := chaos.Run(ctx, cfg)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s etcd: %w", kind, err)
			}
			var faults []string
			total := 0
			for _, k := range []string{chaos.FaultLeaderKill, chaos.FaultLeaderPause, chaos.FaultAgentKill, chaos.FaultPartition,
				chaos.FaultEtcdMemberKill, chaos.FaultEtcdLeaderKill, chaos.FaultQuorumLoss} {
				if n := res.Faults[k]; n > 0 {
					faults = append(faults, fmt.Sprintf("%s %d", k, n))
					total += n
				}
			}
			rep.linef("%s etcd: faults injected %d (%s)", kind, total, strings.Join(faults, ", "))
			rep.linef("%s etcd: submitted %d jobs; operations acknowledged %d, unacknowledged %d; foreign writes %d",
				kind, res.Submitted, res.Acknowledged, res.Unacknowledged, res.ForeignWrites)
			rep.linef("%s etcd: lost %d (jobs whose last operation went unanswered, held to what etcd holds: %d)", kind, res.Lost, res.Uncertain)
			rep.linef("%s etcd: overlapping instances %d (max %.0f ms), of them on an update %d (max %.0f ms); batch instances run again %d",
				kind, res.Overlaps, res.MaxOverlapMS, res.Handovers, res.MaxHandoverMS, res.BatchReruns)
			rep.linef("%s etcd: nodes declared down %d; overlaps on them (allowed) %d", kind, res.NodesDown, res.OverlapsLostNode)
			rep.linef("%s etcd: tasks started %d; healthy tasks restarted %d, stopped %d; restarted after their agent's kill %d; missing events %d",
				kind, res.TasksStarted, res.HealthyRestart, res.HealthyStopped, res.RestartedAfterAgentKill, res.MissingEvents)
			rep.linef("%s etcd: converged %v, %.0f ms after the last fault and the last change asked; run took %s: %s", kind, res.Converged, res.ConvergeMS,
				(time.Duration(res.DurationMS) * time.Millisecond).Round(time.Second), verdict(res.OK()))
			for _, p := range res.Problems {
				rep.linef("%s etcd:   %s", kind, p)
			}
			for k, v := range map[string]any{"faults": total, "leader_faults": res.LeaderChanges, "submitted": res.Submitted,
				"acknowledged": res.Acknowledged, "unacknowledged": res.Unacknowledged, "foreign_writes": res.ForeignWrites,
				"lost": res.Lost, "overlaps": res.Overlaps, "max_overlap_ms": res.MaxOverlapMS, "overlaps_after_machine_loss": res.OverlapsLostNode,
				"update_handovers": res.Handovers, "max_handover_ms": res.MaxHandoverMS, "tasks_started": res.TasksStarted,
				"healthy_restarted": res.HealthyRestart, "healthy_stopped": res.HealthyStopped,
				"restarted_after_agent_kill": res.RestartedAfterAgentKill, "missing_events": res.MissingEvents,
				"batch_reruns": res.BatchReruns, "nodes_down": res.NodesDown, "uncertain_jobs": res.Uncertain,
				"converged": boolNumber(res.Converged), "converge_ms": res.ConvergeMS} {
				rep.set(kind+"_"+k, v)
			}
			if !res.OK() {
				rep.failed = fmt.Errorf("%s etcd: invariants violated (see the report)", kind)
			}
		}
		return rep, nil
	}
}

// boolNumber is 1 for true: the report's JSON values are numbers.
func boolNumber(b bool) int {
	if b {
		return 1
	}
	return 0
}
