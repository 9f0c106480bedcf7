package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func leaderServer(name string, hits *atomic.Int32) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/v1/status/leader" {
			w.Write([]byte(`{"leader":"` + name + `"}`))
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":"boom from ` + name + `"}`))
	}))
}

func TestFailoverSkipsDeadServer(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := dead.URL
	dead.Close() // connection refused from now on
	var hits atomic.Int32
	live := leaderServer("live", &hits)
	defer live.Close()

	c, err := NewWithOptions([]string{deadAddr, strings.TrimPrefix(live.URL, "http://")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Leader(ctx)
	if err != nil || l != "live" {
		t.Fatalf("Leader = %q, %v; want live from the second address", l, err)
	}
	if c.Address() != live.URL {
		t.Fatalf("current address %s, want the live one %s", c.Address(), live.URL)
	}
	// The good address stays current: the dead one is not tried first again.
	if _, err := c.Leader(ctx); err != nil || hits.Load() != 2 || c.Address() != live.URL {
		t.Fatalf("second call: err %v, hits %d, address %s", err, hits.Load(), c.Address())
	}
}

func TestFailoverNotOnHTTPError(t *testing.T) {
	var h1, h2 atomic.Int32
	s1 := leaderServer("s1", &h1)
	defer s1.Close()
	s2 := leaderServer("s2", &h2)
	defer s2.Close()
	c, _ := NewWithOptions([]string{s1.URL, s2.URL}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Node(ctx, "x") // 500 from s1: an answer, not a connect failure
	if !IsStatus(err, http.StatusInternalServerError) || !strings.Contains(err.Error(), "s1") {
		t.Fatalf("want s1's 500, got %v", err)
	}
	if h1.Load() != 1 || h2.Load() != 0 {
		t.Fatalf("hits s1=%d s2=%d; an HTTP error must not fail over", h1.Load(), h2.Load())
	}
}

func TestFailoverAllDownTriesEachOnce(t *testing.T) {
	var addrs []string
	for i := 0; i < 3; i++ {
		s := httptest.NewServer(http.NotFoundHandler())
		addrs = append(addrs, s.URL)
		s.Close()
	}
	c, _ := NewWithOptions(addrs, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Leader(ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("want cannot reach, got %v", err)
	}
	for _, a := range addrs {
		if strings.Count(err.Error(), a) < 1 {
			t.Errorf("error does not name %s: %v", a, err)
		}
	}
	// A later call once one comes back finds it.
	var hits atomic.Int32
	live := leaderServer("back", &hits)
	defer live.Close()
	c2, _ := NewWithOptions([]string{addrs[0], addrs[1], live.URL}, Options{})
	if l, err := c2.Leader(ctx); err != nil || l != "back" {
		t.Fatalf("Leader = %q, %v", l, err)
	}
}

func TestSplitAddrs(t *testing.T) {
	got := SplitAddrs("a:1, b:2,", "c:3")
	if strings.Join(got, "|") != "a:1|b:2|c:3" {
		t.Fatalf("SplitAddrs = %q", got)
	}
	c, err := NewWithOptions(nil, Options{})
	if err != nil || c.Address() != "http://"+DefaultAddress {
		t.Fatalf("NewWithOptions(nil, Options{}) = %v, %v", c.Address(), err)
	}
}
