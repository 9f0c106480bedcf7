package logstream

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSubscribersGetTheirLevel: the process's own handler keeps its level,
// a subscriber gets its own (debug below the process's info), attributes
// added with WithAttrs and WithGroup are in both, and a cancelled
// subscriber gets nothing more.
func TestSubscribersGetTheirLevel(t *testing.T) {
	var own bytes.Buffer
	hub := NewHub()
	log := slog.New(hub.Handler(slog.NewTextHandler(&own, &slog.HandlerOptions{Level: slog.LevelInfo}))).With("server", "s1").WithGroup("g")
	debug, warn := hub.Subscribe(slog.LevelDebug, 10), hub.Subscribe(slog.LevelWarn, 10)
	log.Debug("dbg", "k", 1)
	log.Info("inf")
	log.Warn("wrn")
	lines := func(s *Sub) string {
		ls, dropped := s.Take()
		if dropped != 0 {
			t.Errorf("%d dropped", dropped)
		}
		return string(bytes.Join(ls, nil))
	}
	got := lines(debug)
	for _, want := range []string{"level=DEBUG msg=dbg server=s1 g.k=1\n", "level=INFO msg=inf server=s1\n", "level=WARN msg=wrn server=s1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the debug subscriber has no %q:\n%s", want, got)
		}
	}
	if got := lines(warn); strings.Count(got, "\n") != 1 || !strings.Contains(got, "msg=wrn") {
		t.Errorf("the warn subscriber got:\n%s", got)
	}
	if strings.Contains(own.String(), "dbg") || !strings.Contains(own.String(), "msg=inf server=s1") {
		t.Errorf("the process's own log (info):\n%s", own.String())
	}
	debug.Cancel()
	warn.Cancel()
	log.Error("after")
	if got := lines(debug); got != "" {
		t.Errorf("a cancelled subscriber got %q", got)
	}
	if log.Enabled(context.Background(), slog.LevelDebug) {
		t.Error("debug is enabled with no subscriber wanting it")
	}
}

// TestSlowReaderDropsOldest: a full buffer drops the oldest lines and
// counts them; the newest are kept.
func TestSlowReaderDropsOldest(t *testing.T) {
	hub := NewHub()
	log := slog.New(hub.Handler(slog.DiscardHandler))
	s := hub.Subscribe(slog.LevelInfo, 3)
	defer s.Cancel()
	for _, m := range []string{"m1", "m2", "m3", "m4", "m5"} {
		log.Info(m)
	}
	ls, dropped := s.Take()
	if dropped != 2 || len(ls) != 3 || !bytes.Contains(ls[0], []byte("msg=m3")) || !bytes.Contains(ls[2], []byte("msg=m5")) {
		t.Fatalf("dropped %d, lines %q; want 2 dropped and m3..m5", dropped, ls)
	}
}

// TestServeHTTPStreams: the endpoint streams records at the asked level
// as they are logged, and refuses an unknown level.
func TestServeHTTPStreams(t *testing.T) {
	hub := NewHub()
	log := slog.New(hub.Handler(slog.DiscardHandler))
	srv := httptest.NewServer(hub)
	defer srv.Close()
	if resp, err := http.Get(srv.URL + "?log_level=loud"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("log_level=loud: %v %v", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"?log_level=debug", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		for ctx.Err() == nil {
			log.Debug("tick")
			time.Sleep(20 * time.Millisecond)
		}
	}()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, "level=DEBUG msg=tick") {
		t.Fatalf("first streamed line %q, %v", line, err)
	}
}
