// Command drover-bench measures drover end to end on this machine and
// prints the figures the README quotes. Each scenario is a subcommand
// (see scenarios); every one takes -quick (a small size, for CI) and
// -json (one object per scenario instead of a table):
//
//	go run ./cmd/drover-bench throughput
//	go run ./cmd/drover-bench all -quick -json
//	go run ./cmd/drover-bench -instances 100 -runs 3   # submit -> running on drover dev
//	go run ./cmd/drover-bench failover -trials 20      # leader loss (failover.go)
//	go run ./cmd/drover-bench machineloss -trials 20   # machine loss (machineloss.go)
//
// It builds drover, starts `drover dev` (real server, agent and embedded etcd
// with fsync), submits an exec job of N instances of /bin/sleep, and reads
// each instance's start time as the agent recorded it: submit -> running.
// In the same run it times raw fork/exec of the same command N times, the
// baseline the figures are compared with.
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
	"runtime"
	"slices"
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
	if len(os.Args) > 1 {
		if os.Args[1] == "all" {
			os.Exit(runAll(os.Args[2:]))
		}
		for _, sc := range scenarios {
			if os.Args[1] == sc.name {
				os.Exit(runScenario(sc, os.Args[2:]))
			}
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "failover" { // failover.go
		os.Exit(failoverMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "machineloss" { // machineloss.go
		os.Exit(machineLossMain(os.Args[2:]))
	}
	instances := flag.Int("instances", 100, "instances per job")
	runs := flag.Int("runs", 3, "jobs to submit, one after the other")
	bin := flag.String("drover", "", "drover binary (default: go build ./cmd/drover)")
	flag.StringVar(&pprofAddr, "pprof-addr", "", "have drover dev serve Go profiles here")
	flag.Usage = usage
	flag.Parse()
	if err := run(*bin, *instances, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "drover-bench:", err)
		os.Exit(1)
	}
}

func run(bin string, n, runs int) error {
	tmp, err := os.MkdirTemp("", "drover-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "drover")
		b := exec.Command("go", "build", "-o", bin, "./cmd/drover")
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("building drover: %w", err)
		}
	}
	dev, addr, err := startDev(bin, filepath.Join(tmp, "data"))
	if err != nil {
		return err
	}
	defer func() {
		dev.Process.Signal(syscall.SIGTERM)
		dev.Wait()
	}()
	c, _ := client.New(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := waitNode(ctx, c); err != nil {
		return err
	}

	var lat, placed, raw []time.Duration
	var droverSpan, rawSpan time.Duration
	for r := 0; r < runs; r++ {
		l, p, span, err := submitToRunning(ctx, c, fmt.Sprintf("bench%d", r), n)
		if err != nil {
			return err
		}
		lat = append(lat, l...)
		placed = append(placed, p...)
		droverSpan += span
		rw, rspan, err := rawForkExec(n)
		if err != nil {
			return err
		}
		raw = append(raw, rw...)
		rawSpan += rspan
	}
	fmt.Printf("drover-bench: %d instances x %d runs of /bin/sleep, exec driver, drover dev, %d CPUs, %s/%s\n",
		n, runs, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("submit->placed per instance   %s\n", dist(placed))
	fmt.Printf("submit->running per instance  %s\n", dist(lat))
	fmt.Printf("raw fork/exec per process     %s\n", dist(raw))
	dr := float64(n*runs) / droverSpan.Seconds()
	rr := float64(n*runs) / rawSpan.Seconds()
	fmt.Printf("starts/s: drover %.0f (submit to last running), raw fork/exec %.0f (sequential); drover/raw = %.2f\n", dr, rr, dr/rr)
	return nil
}

var apiLine = regexp.MustCompile(`API at (http://\S+),`)

var pprofAddr string

func startDev(bin, dataDir string) (*exec.Cmd, string, error) {
	args := []string{"dev", "--http-addr", "127.0.0.1:0", "--data-dir", dataDir}
	if pprofAddr != "" {
		args = append(args, "--pprof-addr", pprofAddr)
	}
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
		return nil, "", fmt.Errorf("drover dev did not start within 60s")
	}
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

// submitToRunning submits one job and returns each instance's time from the
// submit call to its task's start as recorded by the agent, and the time to
// the last one. It stops and purges the job afterwards.
func submitToRunning(ctx context.Context, c *client.Client, name string, n int) (lat, placed []time.Duration, span time.Duration, err error) {
	job := &spec.Job{Name: name, Groups: []*spec.Group{{Name: "g", Count: n, Tasks: []*spec.Task{{
		Name: "t", Driver: "exec",
		Config:    spec.TaskConfig{Command: "/bin/sleep", Args: []string{"1000"}},
		Resources: spec.Resources{CPU: 10, MemoryMB: 10},
	}}}}}
	job.Canonicalize()
	t0 := time.Now()
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return nil, nil, 0, err
	}
	var index int64
	for {
		st, idx, err := c.Job(ctx, name, &client.QueryOptions{Index: index, Wait: 30 * time.Second})
		if err != nil {
			return nil, nil, 0, err
		}
		index = idx
		lat, placed = lat[:0], placed[:0]
		for _, a := range st.Allocations {
			placed = append(placed, a.CreateTime.Sub(t0))
			if a.Status != nil && a.Status.Tasks["t"] != nil && !a.Status.Tasks["t"].StartedAt.IsZero() {
				lat = append(lat, a.Status.Tasks["t"].StartedAt.Sub(t0))
			}
		}
		if len(lat) == n {
			break
		}
		if len(st.Failures) > 0 {
			return nil, nil, 0, fmt.Errorf("job %s cannot be placed: %s", name, st.Failures[0].String())
		}
	}
	span = slices.Max(lat)
	if _, err := c.StopJob(ctx, name, true); err != nil {
		return nil, nil, 0, err
	}
	// Wait for the instances to go so that runs do not overlap.
	for {
		allocs, idx, err := c.Allocs(ctx, name, "", &client.QueryOptions{Index: index, Wait: 30 * time.Second})
		if err != nil {
			return nil, nil, 0, err
		}
		index = idx
		if len(allocs) == 0 {
			break
		}
	}
	return lat, placed, span, nil
}

// rawForkExec starts the same command n times in a row, each in its own
// process group as the exec driver does, timing each start.
func rawForkExec(n int) ([]time.Duration, time.Duration, error) {
	var out []time.Duration
	var cmds []*exec.Cmd
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		cmd := exec.Command("/bin/sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, 0, err
		}
		out = append(out, time.Since(t))
		cmds = append(cmds, cmd)
	}
	span := time.Since(start)
	for _, c := range cmds {
		c.Process.Kill()
		c.Wait()
	}
	return out, span, nil
}

func dist(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%7.2fms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", len(s), ms(q(0.50)), ms(q(0.90)), ms(q(0.99)), ms(s[len(s)-1]))
}

func usage() {
	w := flag.CommandLine.Output()
	fmt.Fprintf(w, "usage: drover-bench SCENARIO [-quick] [-json] [flags]\n       drover-bench all [-quick] [-json]\n       drover-bench [-instances N -runs N]   (submit -> running on drover dev)\n\nscenarios:\n")
	for _, sc := range scenarios {
		fmt.Fprintf(w, "  %-12s %s\n", sc.name, sc.about)
	}
	fmt.Fprintf(w, "\nflags of the default mode:\n")
	flag.PrintDefaults()
}

// runAll runs every scenario with the given flags (only -quick and -json
// are shared), one after the other; the exit code is 1 if any failed.
func runAll(args []string) int {
	code := 0
	for _, sc := range scenarios {
		if runScenario(sc, args) != 0 {
			code = 1
		}
	}
	return code
}
