package main

// drover-bench events: how fast a state change reaches an event stream,
// and what the history costs on disk.
//
//	go run ./cmd/drover-bench events               # 10 jobs x 5 instances, then 100,000 events
//	go run ./cmd/drover-bench events -jobs 20
//
// Delivery: it starts `drover dev`, follows GET /v1/events (server-sent
// events, as `drover events -f`), submits the jobs, waits until every
// instance runs, stops them, and for every event that arrives takes the
// time from the event's own time (when the server wrote the change, or the
// agent saw the task event it reports) to its arrival on the stream. Both
// clocks are this machine's.
//
// Disk: it writes 100,000 events, in records of 20 (a status batch's
// size), through the registry into a fresh embedded etcd, and reports the
// growth of etcd's database in use (etcd's own figure: DbSizeInUse) and the
// bytes of the events' JSON.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{name: "events", about: "event delivery: a state change to its event on a stream (p99); the history's disk cost per 100,000 events", flags: eventsFlags})
}

func eventsFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	jobs := fs.Int("jobs", 10, "jobs of 5 instances to submit and stop (-quick: 2)")
	n := fs.Int("disk-events", 100_000, "events to write for the disk cost (-quick: 10,000)")
	return func() (*report, error) {
		return eventsBench(o.drover, sized(fs, o, "jobs", *jobs, 2), sized(fs, o, "disk-events", *n, 10_000))
	}
}

func eventsBench(bin string, jobs, diskEvents int) (*report, error) {
	tmp, err := os.MkdirTemp("", "drover-bench-events-")
	if err != nil {
		return nil, err
	}
	keep := false // an embedded etcd that did not stop keeps its files
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	c, _, stop, err := devNode(bin, filepath.Join(tmp, "data"))
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	_, start, err := c.Events(ctx, client.EventOptions{})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var lat []time.Duration
	byTopic := map[string][]time.Duration{}
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	followed := make(chan error, 1)
	go func() {
		followed <- c.FollowEvents(fctx, client.EventOptions{After: start}, func(e spec.Event) error {
			d := time.Since(e.Time)
			mu.Lock()
			lat = append(lat, d)
			byTopic[e.Topic] = append(byTopic[e.Topic], d)
			mu.Unlock()
			return nil
		})
	}()
	for i := range jobs {
		if _, err := c.SubmitJob(ctx, sleepJob(fmt.Sprintf("ev%d", i), 5), 0); err != nil {
			return nil, err
		}
	}
	if err := waitFor(ctx, 2*time.Minute, "every instance running", func() (bool, error) {
		allocs, _, err := c.Allocs(ctx, "", "", nil)
		running := 0
		for _, a := range allocs {
			if a.Status != nil && a.Status.ClientStatus == spec.ClientRunning {
				running++
			}
		}
		return running == 5*jobs, err
	}); err != nil {
		return nil, err
	}
	stopAllJobs(ctx, c)
	time.Sleep(time.Second) // the last reports' events
	stopFollow()
	<-followed

	rep := newReport("events")
	mu.Lock()
	defer mu.Unlock()
	rep.linef("drover-bench events: %d jobs x 5 instances (exec sleep) submitted, run and stopped on drover dev; every event followed over GET /v1/events", jobs)
	rep.linef("state change -> event on the stream  n=%d p50=%s p99=%s max=%s", len(lat), ms(pct(lat, 50)), ms(pct(lat, 99)), ms(pct(lat, 100)))
	for _, t := range []string{spec.TopicJob, spec.TopicAlloc, spec.TopicDeployment, spec.TopicNode} {
		if d := byTopic[t]; len(d) > 0 {
			rep.linef("  topic %-10s n=%d p50=%s p99=%s", t, len(d), ms(pct(d, 50)), ms(pct(d, 99)))
		}
	}
	rep.set("events", len(lat))
	rep.set("delivery_p50", pct(lat, 50))
	rep.set("delivery_p99", pct(lat, 99))
	if len(lat) == 0 {
		return rep, fmt.Errorf("no event arrived on the stream")
	}

	dbGrowth, valueBytes, took, stuck, err := eventDiskCost(filepath.Join(tmp, "disk"), diskEvents)
	keep = stuck
	if err != nil {
		return rep, err
	}
	per := float64(100_000) / float64(diskEvents)
	rep.linef("disk: %d events in records of 20 -> etcd's database in use grew %.1f MB (%.1f MB per 100,000 events); the events' JSON %.1f MB per 100,000; written in %s",
		diskEvents, float64(dbGrowth)/1e6, float64(dbGrowth)*per/1e6, float64(valueBytes)*per/1e6, took.Round(time.Millisecond))
	rep.set("disk_bytes_per_100k_events", int64(float64(dbGrowth)*per))
	rep.set("record_bytes_per_100k_events", int64(float64(valueBytes)*per))
	return rep, nil
}

// eventDiskCost writes n typical alloc events into a fresh embedded etcd
// and returns the growth of its database file and the records' bytes.
//
// stuck says the etcd did not stop within its bound: its files must stay
// (removed under it, it fails and exits the process).
func eventDiskCost(dir string, n int) (dbGrowth, valueBytes int64, took time.Duration, stuck bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Errors only, to stderr: a fatal one ends the process, and says why.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: dir, ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		return 0, 0, 0, false, err
	}
	defer func() {
		if cerr := emb.Close(); cerr != nil {
			fmt.Fprintf(os.Stderr, "drover-bench: %v; leaving %s\n", cerr, dir)
			stuck = true
		}
	}()
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		return 0, 0, 0, false, err
	}
	defer reg.Close()
	// etcd's own account of its database in use (its file grows in
	// steps, and its WAL is preallocated, so file sizes say little).
	size := func() int64 {
		_, inUse, err := reg.StorageSize(ctx)
		if err != nil {
			return 0
		}
		return inUse
	}
	before := size()
	t0 := time.Now()
	const per = 20
	for i := 0; i < n; i += per {
		batch := make([]spec.Event, 0, per)
		for j := i; j < min(n, i+per); j++ {
			batch = append(batch, spec.Event{Time: time.Now(), Topic: spec.TopicAlloc, Type: spec.EventStarted, Job: "web",
				Namespace: "default", Node: "node-17", Alloc: fmt.Sprintf("web.api[%d]", j%1000), AllocID: fmt.Sprintf("0f6c1a2e-%04x-4b7e-9c1d-5e3a8b2f%04x", j%65536, j%65536),
				Task: "server", Message: fmt.Sprintf("pid %d", 10000+j)})
		}
		if err := reg.AppendEvents(ctx, batch); err != nil {
			return 0, 0, 0, false, err
		}
	}
	took = time.Since(t0)
	evs, _, err := reg.ListEvents(ctx, registry.EventQuery{})
	if err != nil {
		return 0, 0, 0, false, err
	}
	for _, e := range evs {
		e.Index = 0 // set on read, not stored
		b, _ := jsonSize(e)
		valueBytes += b
	}
	return size() - before, valueBytes, took, false, nil
}

// jsonSize is e's encoded size.
func jsonSize(e spec.Event) (int64, error) {
	b, err := json.Marshal(e)
	return int64(len(b)), err
}
