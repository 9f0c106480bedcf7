package server

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// TestEventStreamsReadTheStore: an event another server stores through
// the registry reaches every stream of a follower from the follower's
// store, each stream resuming after the index it was given; the streams
// open no watch of etcd (the server's one watch feeds them all), and the
// event list reads no etcd.
func TestEventStreamsReadTheStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	open := func() *registry.Registry {
		reg, err := registry.Open(ctx, emb.Endpoints(), log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		return reg
	}
	other, own := open(), open() // another server's registry client, and the follower's
	follower := New(Config{Registry: own, ID: "follower", Logger: log, APIOnly: true})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { follower.Run(sctx); close(done) }()
	hs := httptest.NewServer(follower.Handler(nil))
	t.Cleanup(func() {
		hs.Close()
		stop()
		<-done
	})
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}

	// Two records, and the follower's store holding them.
	for _, e := range []spec.Event{{Topic: spec.TopicJob, Type: spec.EventSubmitted, Job: "web"}, {Topic: spec.TopicNode, Type: spec.EventRegistered, Node: "n1"}} {
		if err := other.AppendEvents(ctx, []spec.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := other.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.state.WaitRev(ctxTimeout(t, 10*time.Second), rev); err != nil {
		t.Fatal(err)
	}

	watchers, reads := etcdWatchers(t), etcdReads(t)
	const lists = 20
	var listed []spec.Event
	for range lists {
		evs, idx, err := c.Events(ctx, client.EventOptions{})
		if err != nil || len(evs) != 2 || evs[0].Type != spec.EventSubmitted || evs[1].Type != spec.EventRegistered || idx < rev {
			t.Fatalf("events: %+v at %d, %v; want Submitted and Registered at %d or later", evs, idx, err, rev)
		}
		listed = evs
	}
	if n := etcdReads(t) - reads; n >= lists/4 {
		t.Errorf("%d lists of the events made %d reads of etcd, want none of their own", lists, n)
	}

	// Three streams: from the start, after the first event, and of the
	// node topic. Each has streamed the history it asked for before the
	// next record is written, so that one comes to each as it follows.
	streams := map[string]client.EventOptions{"all": {}, "after": {After: listed[0].Index}, "nodes": {Topics: []string{spec.TopicNode}}}
	got := map[string]chan spec.Event{}
	for name, o := range streams {
		ch := make(chan spec.Event, 16)
		got[name] = ch
		go c.FollowEvents(ctx, o, func(e spec.Event) error {
			ch <- e
			return nil
		})
	}
	expect := func(name string, types ...spec.EventType) {
		t.Helper()
		for _, typ := range types {
			select {
			case e := <-got[name]:
				if e.Type != typ {
					t.Fatalf("stream %s: %+v, want %s", name, e, typ)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("stream %s: no %s within 10s", name, typ)
			}
		}
	}
	expect("all", spec.EventSubmitted, spec.EventRegistered)
	expect("after", spec.EventRegistered)
	expect("nodes", spec.EventRegistered)
	if err := other.AppendEvents(ctx, []spec.Event{{Topic: spec.TopicJob, Type: spec.EventStopped, Job: "web"}, {Topic: spec.TopicNode, Type: spec.EventDown, Node: "n1"}}); err != nil {
		t.Fatal(err)
	}
	expect("all", spec.EventStopped, spec.EventDown)
	expect("after", spec.EventStopped, spec.EventDown)
	expect("nodes", spec.EventDown)
	if n := etcdWatchers(t) - watchers; n != 0 {
		t.Errorf("three event streams changed etcd's watchers by %g, want 0: the server's one watch feeds them", n)
	}
}

// etcdWatchers is how many watchers the embedded etcd members of this
// process serve.
func etcdWatchers(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_debugging_mvcc_watcher_total" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("etcd_debugging_mvcc_watcher_total is not registered: the test cannot count watchers")
	return 0
}
