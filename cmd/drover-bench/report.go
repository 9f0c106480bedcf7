package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

// scenario is one subcommand of drover-bench: a measurement that prints a
// report.
type scenario struct {
	name  string
	about string // one line for the usage
	// heavy: not run by `all` nor by bench_test's quick pass (its own
	// package's test runs its CI size).
	heavy bool
	// flags adds the scenario's own flags; run then measures with them.
	flags func(fs *flag.FlagSet, o *options) func() (*report, error)
}

// options are the flags every scenario has.
type options struct {
	// quick runs at a size small enough for CI (a few seconds), to prove
	// the scenario works; its figures are not meant to be quoted.
	quick bool
	json  bool
	// drover is the drover binary for scenarios that run real processes;
	// "" builds ./cmd/drover.
	drover string
	// memProfile, when set, is where a scenario that measures its heap
	// writes a heap profile, at the time it measures.
	memProfile string
}

// report is a scenario's result: lines for people, and values for
// machines (one JSON object per scenario, snake_case keys).
type report struct {
	Scenario string
	Lines    []string
	Values   map[string]any
	// failed, when set, makes drover-bench exit 1 after printing the
	// report: the scenario ran and found its target missed.
	failed error
}

func newReport(name string) *report {
	return &report{Scenario: name, Values: map[string]any{}}
}

// linef adds a line for people.
func (r *report) linef(format string, args ...any) {
	r.Lines = append(r.Lines, fmt.Sprintf(format, args...))
}

// set records a value for machines; durations are written in ms.
func (r *report) set(key string, v any) {
	if d, ok := v.(time.Duration); ok {
		v = float64(d.Microseconds()) / 1000
	}
	r.Values[key] = v
}

// write prints the report as a table of lines or as one JSON object.
func (r *report) write(w io.Writer, asJSON bool) error {
	if asJSON {
		out := map[string]any{"scenario": r.Scenario, "cpus": runtime.NumCPU(), "os": runtime.GOOS, "arch": runtime.GOARCH}
		for k, v := range r.Values {
			out[k] = v
		}
		return json.NewEncoder(w).Encode(out)
	}
	_, err := fmt.Fprintln(w, strings.Join(r.Lines, "\n"))
	return err
}

// mutexSampling is the share of mutex contention events -mutexprofile
// records: 1 in this many.
const mutexSampling = 10

// startMutexProfile starts recording contended mutexes; stop writes the
// profile to path, which is created now so that a bad path fails before
// the scenario runs.
func startMutexProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-mutexprofile: %w", err)
	}
	prev := runtime.SetMutexProfileFraction(mutexSampling)
	return func() error {
		defer runtime.SetMutexProfileFraction(prev)
		err := pprof.Lookup("mutex").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing the mutex profile to %s: %w", path, err)
		}
		return nil
	}, nil
}

// runScenario parses a scenario's flags, runs it and prints its report;
// it returns the process exit code.
func runScenario(sc scenario, args []string) int {
	fs := flag.NewFlagSet("drover-bench "+sc.name, flag.ExitOnError)
	var o options
	fs.BoolVar(&o.quick, "quick", false, "run at a small size, to prove the scenario works (CI); the figures are not meant to be quoted")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
	fs.StringVar(&o.drover, "drover", "", "drover binary for scenarios that run real processes (default: go build ./cmd/drover)")
	fs.StringVar(&o.memProfile, "memprofile", "", "write a heap profile of this process to this file when the scenario measures its heap (state, agents)")
	memProfileRate := fs.Int("memprofilerate", 0, "with -memprofile, record one allocation per this many bytes (1: every allocation, exact but slow; default: the runtime's 512 KB)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the in-process scenarios: server and agents) to this file")
	mutexProfile := fs.String("mutexprofile", "", fmt.Sprintf("write a profile of this process's contended mutexes (1 in %d sampled) to this file", mutexSampling))
	run := sc.flags(fs, &o)
	fs.Parse(args)
	if *memProfileRate > 0 {
		runtime.MemProfileRate = *memProfileRate
	}
	if *mutexProfile != "" {
		stop, err := startMutexProfile(*mutexProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drover-bench %s: %v\n", sc.name, err)
			return 1
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(os.Stderr, "drover-bench %s: %v\n", sc.name, err)
			}
		}()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drover-bench %s: %v\n", sc.name, err)
			return 1
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	rep, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "drover-bench %s: %v\n", sc.name, err)
		return 1
	}
	if err := rep.write(os.Stdout, o.json); err != nil {
		fmt.Fprintf(os.Stderr, "drover-bench %s: %v\n", sc.name, err)
		return 1
	}
	if rep.failed != nil {
		fmt.Fprintf(os.Stderr, "drover-bench %s: %v\n", sc.name, rep.failed)
		return 1
	}
	return 0
}
