package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/testbin"
)

// droverBin is the binary the real-process scenarios run, built once by
// TestMain.
var droverBin string

// The agents scenario runs this binary again as its agents' process
// (agentsChildCmd): the test binary does it too.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == agentsChildCmd {
		os.Exit(agentsChild(os.Args[2:]))
	}
	testbin.Main(m, &droverBin)
}

// commonKeys are in every scenario's JSON object (report.write).
var commonKeys = []string{"arch", "cpus", "os", "scenario"}

// wantKeys are the JSON keys, besides commonKeys, of each scenario. A
// scenario not listed must still report at least one value, all numbers.
var wantKeys = map[string][]string{
	"throughput": {"agents", "agents_startup_ms", "alloc_commits", "alloc_commits_per_placement", "baseline_put_p50_ms",
		"baseline_puts_per_second_1", "baseline_puts_per_second_64", "etcd_requests", "etcd_txns", "etcd_txns_per_placement",
		"etcd_writes", "etcd_writes_per_placement", "instances", "jobs", "log_warnings", "node_ttl_ms", "placements",
		"placements_per_second", "submit_ms", "time_to_all_placed_ms", "time_to_all_running_ms"},
	"latency": {"agents", "agents_startup_ms", "baseline_put_p50_ms", "baseline_put_p99_ms", "log_warnings", "node_ttl_ms",
		"rate_1_accepted_p50_ms", "rate_1_accepted_p99_ms", "rate_1_assigned_p50_ms", "rate_1_assigned_p99_ms", "rate_1_assigned_p99_to_put_p99", "rate_1_etcd_writes_per_job", "rate_1_jobs",
		"rate_1_pass_mean_ms", "rate_1_passes", "rate_1_passes_all", "rate_1_passes_over_25ms", "rate_1_put_during_p50_ms", "rate_1_put_during_p99_ms", "rate_1_seen_max_ms", "rate_1_seen_p50_ms",
		"rate_1_seen_p99_ms", "rate_1_snapshot_mean_ms",
		"rate_50_accepted_p50_ms", "rate_50_accepted_p99_ms", "rate_50_assigned_p50_ms", "rate_50_assigned_p99_ms", "rate_50_assigned_p99_to_put_p99", "rate_50_etcd_writes_per_job", "rate_50_jobs",
		"rate_50_pass_mean_ms", "rate_50_passes", "rate_50_passes_all", "rate_50_passes_over_25ms", "rate_50_put_during_p50_ms", "rate_50_put_during_p99_ms", "rate_50_seen_max_ms", "rate_50_seen_p50_ms",
		"rate_50_seen_p99_ms", "rate_50_snapshot_mean_ms"},
	"steady": {"agents", "agents_startup_ms", "api_requests_per_second_per_agent", "baseline_cpu_percent", "baseline_etcd_requests_per_second",
		"baseline_rss_mb", "cpu_percent", "duration_ms", "etcd_requests_per_second", "etcd_requests_per_second_per_agent", "log_warnings",
		"node_ttl_ms", "rss_mb", "warnings_during"},
	"loss": {"agents", "agents_startup_ms", "false_downs", "killed", "killed_seen_down", "log_warnings", "lost_instances", "node_ttl_ms",
		"node_watch_errors", "registrations_after_kill", "replacements_placed", "time_to_replacements_placed_ms",
		"time_to_replacements_running_ms", "time_to_seen_down_ms", "warnings_after_kill"},
	"starts": {"instances", "runs", "starts_per_second", "raw_exec_starts_per_second", "raw_fork_exec_per_second", "raw_fork_exec_before_exec_per_second", "raw_fork_exec_before_raw_exec_per_second", "ratio_to_raw", "raw_exec_ratio_to_raw",
		"exec_cpu_ms_per_start", "raw_exec_cpu_ms_per_start", "raw_fork_exec_cpu_ms_per_start",
		"submit_to_running_p50_ms", "submit_to_running_p99_ms", "submit_to_running_max_ms",
		"raw_exec_submit_to_running_p50_ms", "raw_exec_submit_to_running_p99_ms", "raw_exec_submit_to_running_max_ms",
		"submit_to_placed_p50_ms", "submit_to_placed_p99_ms", "submit_to_placed_max_ms",
		"raw_fork_exec_p50_ms", "raw_fork_exec_p99_ms", "raw_fork_exec_max_ms",
		"quiet_waits", "quiet_wait_total_ms", "quiet_wait_max_ms", "quiet_wait_timeouts"},
	"ui": {"agents", "agents_startup_ms", "api_jobs_bytes", "api_jobs_p50_ms", "instances", "jobs", "load_max_ms", "load_p50_ms", "log_warnings", "node_ttl_ms", "ready_ms", "rows_drawn",
		"stream_lag_max_ms", "stream_lag_p99_ms", "stream_long_tasks", "stream_long_tasks_ms", "topology_max_ms", "topology_p50_ms"},
	"footprint": {"interval_seconds", "tasks", "idle_rss_mb", "idle_rss_anon_mb", "idle_cpu_percent", "idle_threads",
		"exec_tasks_rss_mb", "exec_tasks_rss_anon_mb", "exec_tasks_cpu_percent",
		"raw_exec_tasks_rss_mb", "raw_exec_tasks_rss_anon_mb", "raw_exec_tasks_cpu_percent", "tasks_threads", "server_rss_mb",
		"readopt_seconds", "readopt_restarted"},
	"failover": {"trials", "jobs_per_second", "jobs_submitted", "submit_errors", "lost_placements", "duplicated_placements",
		"kill_to_leader_p50_ms", "kill_to_leader_p99_ms", "kill_to_leader_max_ms",
		"kill_to_first_placement_p50_ms", "kill_to_first_placement_p99_ms", "kill_to_first_placement_max_ms",
		"gap_p50_ms", "gap_p99_ms", "gap_max_ms"},
	"docker": {"rounds", "ratio_to_docker_run", "submit_to_started_p50_ms", "submit_to_started_p99_ms", "submit_to_started_max_ms",
		"submit_to_running_seen_p50_ms", "submit_to_running_seen_p99_ms", "submit_to_running_seen_max_ms",
		"docker_run_p50_ms", "docker_run_p99_ms", "docker_run_max_ms"},
	"health": {"rounds", "interval_ms", "fail_to_unhealthy_p50_ms", "fail_to_unhealthy_p99_ms", "fail_to_unhealthy_max_ms",
		"fail_to_dns_removal_p50_ms", "fail_to_dns_removal_p99_ms", "fail_to_dns_removal_max_ms",
		"probe_to_unhealthy_p50_ms", "probe_to_unhealthy_p99_ms", "probe_to_unhealthy_max_ms",
		"probe_to_dns_removal_p50_ms", "probe_to_dns_removal_p99_ms", "probe_to_dns_removal_max_ms"},
	"rollout": {"instances", "max_parallel", "min_healthy_time_ms", "rollout_ms", "gates_ms", "overhead_per_batch_ms", "ratio_to_gates",
		"min_healthy_good", "min_healthy_bad", "bad_to_failed_ms", "bad_to_reverted_ms"},
	"state": {"nodes", "allocs", "probes", "register_nodes_ms", "place_allocs_ms", "probe_p50_ms", "probe_p99_ms", "snapshot_ms",
		"metrics_scrape_ms", "metrics_state_errors", "idle_cpu_percent", "idle_window_cpu_percent", "full_pass_ms", "resync_share_percent", "heap_bytes_per_alloc", "heap_bytes_per_alloc_before_scrapes", "rss_mb", "idle_alloc_writes", "log_warnings"},
	"agents": {"agents", "connected", "conns_per_agent", "server_bytes_per_agent", "heartbeat_p99_ms",
		"heartbeats_idle", "heartbeat_idle_p99_ms", "heartbeats_placing", "heartbeat_placing_p99_ms", "heartbeats_steady", "heartbeat_steady_p99_ms"},
	"machineloss": {"trials", "node_ttl_ms", "kill_to_placed_p50_ms", "kill_to_placed_p99_ms", "kill_to_placed_max_ms",
		"kill_to_running_p50_ms", "kill_to_running_p99_ms", "kill_to_running_max_ms"},
}

// TestScenariosQuick runs every registered scenario at -quick with -json,
// as `drover-bench all -quick -json` would, and checks the shape of what
// each prints: CI proves the harness works. It asserts nothing about the
// figures, which depend on the machine.
func TestScenariosQuick(t *testing.T) {
	testbin.TouchSources("../..")
	if len(scenarios) == 0 {
		t.Fatal("no scenario registered")
	}
	for name := range wantKeys {
		if !slices.ContainsFunc(scenarios, func(sc scenario) bool { return sc.name == name }) {
			t.Errorf("scenario %s is not registered", name)
		}
	}
	for _, sc := range scenarios {
		if sc.heavy {
			continue // its own package's test runs its CI size
		}
		t.Run(sc.name, func(t *testing.T) {
			got := runQuick(t, sc)
			if got["scenario"] != sc.name {
				t.Errorf("scenario = %v, want %q", got["scenario"], sc.name)
			}
			var keys []string
			for k, v := range got {
				keys = append(keys, k)
				if _, ok := v.(float64); !ok && k != "scenario" && k != "os" && k != "arch" {
					t.Errorf("%s = %v (%T), want a number", k, v, v)
				}
			}
			slices.Sort(keys)
			if want, ok := wantKeys[sc.name]; ok {
				want = slices.Sorted(slices.Values(append(slices.Clone(commonKeys), want...)))
				if diff := cmp.Diff(want, keys); diff != "" {
					t.Errorf("JSON keys (-want +got):\n%s", diff)
				}
			} else if len(keys) <= len(commonKeys) {
				t.Errorf("JSON keys %v: no values beyond the common ones", keys)
			}
		})
	}
}

// runQuick runs sc with -quick -json in this process, as runScenario
// does, and decodes the object it writes.
func runQuick(t *testing.T, sc scenario) map[string]any {
	t.Helper()
	fs := flag.NewFlagSet(sc.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := options{quick: true, json: true, drover: droverBin}
	run := sc.flags(fs, &o)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	rep, err := run()
	if ue := (*unavailableError)(nil); errors.As(err, &ue) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, but %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.write(&buf, o.json); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	dec := json.NewDecoder(&buf)
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding %q: %v", buf.String(), err)
	}
	if dec.More() {
		t.Errorf("more than one JSON value: %q", buf.String())
	}
	return got
}
