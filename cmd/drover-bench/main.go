// Command drover-bench measures drover end to end on this machine and
// prints the figures the README quotes. Each scenario is a subcommand
// (see scenarios); every one takes -quick (a small size, for CI) and
// -json (one object per scenario instead of a table):
//
//	go run ./cmd/drover-bench throughput
//	go run ./cmd/drover-bench all -quick -json
//	go run ./cmd/drover-bench starts                   # exec and raw_exec starts on drover dev (starts.go)
//	go run ./cmd/drover-bench -instances 100 -runs 5   # the same: flags alone run starts
//	go run ./cmd/drover-bench footprint                # a real agent's RSS, CPU and threads (footprint.go)
//	go run ./cmd/drover-bench failover -trials 20      # leader loss (failover.go)
//	go run ./cmd/drover-bench machineloss -trials 20   # machine loss (machineloss.go)
//
// The scenarios that run real processes build ./cmd/drover (or take
// -drover) and run it as `drover dev`, `drover server` and `drover agent`;
// each measures, in the same run, the baseline its figures are compared
// with.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// scenarios are the subcommands that print a report; each file that
// defines one registers it.
var scenarios []scenario

func register(sc scenario) { scenarios = append(scenarios, sc) }

func main() {
	args := os.Args[1:]
	if len(args) == 0 || slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		usage()
		os.Exit(2)
	}
	if args[0] == agentsChildCmd {
		os.Exit(agentsChild(args[1:]))
	}
	if args[0] == "all" {
		os.Exit(runAll(args[1:]))
	}
	// Flags without a scenario are the starts scenario's: the README's
	// `drover-bench -instances 100 -runs 5` predates the subcommands.
	if strings.HasPrefix(args[0], "-") {
		os.Exit(runScenario(lookup("starts"), args))
	}
	for _, sc := range scenarios {
		if args[0] == sc.name {
			os.Exit(runScenario(sc, args[1:]))
		}
	}
	fmt.Fprintf(os.Stderr, "drover-bench: unknown scenario %q\n\n", args[0])
	usage()
	os.Exit(2)
}

func lookup(name string) scenario {
	for _, sc := range scenarios {
		if sc.name == name {
			return sc
		}
	}
	panic("drover-bench: no scenario " + name)
}

func usage() {
	w := os.Stderr
	fmt.Fprintf(w, "usage: drover-bench SCENARIO [-quick] [-json] [flags]\n       drover-bench all [-quick] [-json]\n       drover-bench [starts flags]   (the starts scenario)\n\nscenarios (drover-bench SCENARIO -h for its flags):\n")
	for _, sc := range scenarios {
		fmt.Fprintf(w, "  %-12s %s\n", sc.name, sc.about)
	}
}

// runAll runs every scenario with the given flags (only -quick, -json and
// -drover are shared), one after the other; the exit code is 1 if any
// failed.
func runAll(args []string) int {
	code := 0
	for _, sc := range scenarios {
		if sc.heavy {
			continue
		}
		if runScenario(sc, args) != 0 {
			code = 1
		}
	}
	return code
}

// unavailableError says that a scenario cannot run on this machine (no
// /proc, no /bin/sleep): bench_test skips it rather than failing.
type unavailableError struct{ what string }

func (e *unavailableError) Error() string { return "cannot run here: " + e.what }

// need returns an unavailableError unless every path exists.
func need(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return &unavailableError{fmt.Sprintf("%s is needed (%v)", p, err)}
		}
	}
	return nil
}

// sized returns quick if -quick was given and the flag name was not set
// explicitly, else full: explicit flags win over -quick's sizes.
func sized[T any](fs *flag.FlagSet, o *options, name string, full, quick T) T {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if o.quick && !set {
		return quick
	}
	return full
}

// droverBinary returns bin, or builds ./cmd/drover into dir when bin is "".
func droverBinary(bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "drover")
	b := exec.Command("go", "build", "-o", bin, "./cmd/drover")
	if out, err := b.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building drover (run from the module root, or give -drover): %v\n%s", err, out)
	}
	return bin, nil
}

var apiLine = regexp.MustCompile(`API at (https://\S+),`)

// startDev runs `drover dev` with its state in dataDir and extra flags,
// and returns once it prints its API address.
func startDev(bin, dataDir string, extra ...string) (*exec.Cmd, string, error) {
	// Dynamic ports apart from internal/e2e's (21000-21999), whose tests
	// run beside this package's in `go test ./...`: tasks bind them.
	args := append([]string{"dev", "--http-addr", "127.0.0.1:0", "--data-dir", dataDir,
		"--min-dynamic-port", "22000", "--max-dynamic-port", "22999"}, extra...)
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := apiLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, a, nil
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", fmt.Errorf("drover dev did not start within 60s")
	}
}

// devNode runs `drover dev` (startDev) and waits, up to a minute, for its
// node to register; pid is its process. stop ends it (SIGTERM) and waits
// for it to exit.
func devNode(bin, dataDir string, extra ...string) (c *client.Client, pid int, stop func(), err error) {
	dev, addr, err := startDev(bin, dataDir, extra...)
	if err != nil {
		return nil, 0, nil, err
	}
	stop = func() {
		dev.Process.Signal(syscall.SIGTERM)
		dev.Wait()
	}
	if c, err = devClient(addr); err != nil {
		stop()
		return nil, 0, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := waitNode(ctx, c); err != nil {
		stop()
		return nil, 0, nil, err
	}
	return c, dev.Process.Pid, stop, nil
}

// devClient is an operator's client of the drover dev at addr: with the
// certificates and the token dev leaves for the CLI on this machine.
func devClient(addr string) (*client.Client, error) {
	return client.Config{Addresses: []string{addr}}.Resolve().Client()
}

// clusterClient is an operator's client of the servers at addrs, whose
// certificates are in tlsDir, with the management token from the ACL
// bootstrap: for a cluster just started, which has none yet.
func clusterClient(ctx context.Context, tlsDir string, addrs ...string) (*client.Client, error) {
	cfg := client.Config{Addresses: addrs, TLSDir: tlsDir}
	c, err := cfg.Client()
	if err != nil {
		return nil, err
	}
	tok, err := c.ACLBootstrap(ctx)
	if err != nil {
		return nil, fmt.Errorf("acl bootstrap: %w", err)
	}
	cfg.Token = tok.SecretID
	return cfg.Client()
}

func waitNode(ctx context.Context, c *client.Client) error {
	for {
		nodes, _, err := c.Nodes(ctx, nil)
		if err == nil && len(nodes) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no node registered: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sleepJob is a service job of n instances of `sleep 1000`. Each asks for
// 1 MHz and 1 MB so that hundreds fit on one node: the scenarios measure
// drover, not the packing.
func sleepJob(name string, n int) *spec.Job {
	job := &spec.Job{Name: name, Groups: []*spec.Group{{Name: "g", Count: n, Tasks: []*spec.Task{{
		Name: "t", Driver: "exec",
		Config:    spec.TaskConfig{Command: "/bin/sleep", Args: []string{"1000"}},
		Resources: spec.Resources{CPU: 1, MemoryMB: 1},
	}}}}}
	job.Canonicalize()
	return job
}

// stopAllJobs stops and purges every job and waits (up to a minute) until
// their allocs are gone, so that no task outlives a scenario: agents leave
// their tasks running when they exit.
func stopAllJobs(ctx context.Context, c *client.Client) {
	deadline := time.Now().Add(60 * time.Second)
	// A server just started again answers 503 until it has read the
	// registry: ask until one answers, or nothing would be stopped.
	jobs, _, err := c.Jobs(ctx, nil)
	for err != nil && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		jobs, _, err = c.Jobs(ctx, nil)
	}
	// Stopped first, purged once their agents have stopped every task: a
	// purge alone can leave no alloc to wait for while tasks still run.
	for _, j := range jobs {
		c.StopJob(ctx, j.Name, false)
	}
	waitTasksStopped(ctx, c, nil)
	for _, j := range jobs {
		c.StopJob(ctx, j.Name, true)
	}
	waitAllocsGone(ctx, c)
}

// waitTasksStopped waits, at most a minute, until no alloc of jobs (nil:
// of any job), stopped before, still runs on an agent.
func waitTasksStopped(ctx context.Context, c *client.Client, jobs []string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		allocs, _, err := c.Allocs(ctx, "", "", nil)
		running := func(a *spec.Alloc) bool {
			return (jobs == nil || slices.Contains(jobs, a.Job)) &&
				!a.Terminal() && (a.Status != nil || a.DesiredStatus == spec.DesiredRun) // never reached an agent: nothing runs
		}
		if err == nil && !slices.ContainsFunc(allocs, running) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitAllocsGone(ctx context.Context, c *client.Client) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		allocs, _, err := c.Allocs(ctx, "", "", nil)
		if err == nil && len(allocs) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func sortedCopy(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// dist summarises durations in ms; distS in seconds.
func dist(d []time.Duration) string {
	s := sortedCopy(d)
	ms := func(d time.Duration) string { return fmt.Sprintf("%7.2fms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", len(s), ms(quantile(s, 0.50)), ms(quantile(s, 0.90)), ms(quantile(s, 0.99)), ms(s[len(s)-1]))
}

func distS(d []time.Duration) string {
	s := sortedCopy(d)
	sec := func(d time.Duration) string { return fmt.Sprintf("%6.2fs", d.Seconds()) }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", len(s), sec(quantile(s, 0.50)), sec(quantile(s, 0.90)), sec(quantile(s, 0.99)), sec(s[len(s)-1]))
}

// setDist records a distribution's p50, p99 and max under prefix_.
func (r *report) setDist(prefix string, d []time.Duration) {
	s := sortedCopy(d)
	r.set(prefix+"_p50_ms", quantile(s, 0.50))
	r.set(prefix+"_p99_ms", quantile(s, 0.99))
	r.set(prefix+"_max_ms", s[len(s)-1])
}

// verdict says whether a figure meets its target, for the human table.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
