package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// logged is a log that keeps the messages it hears, for a test to wait on.
type logged chan string

func (l logged) Enabled(context.Context, slog.Level) bool { return true }
func (l logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logged) WithGroup(string) slog.Handler            { return l }

func (l logged) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Message:
	default: // a test that keeps hearing must read
	}
	return nil
}

// heard waits for msg among what the log heard.
func (l logged) heard(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-l:
			if m == msg {
				return
			}
		case <-timeout:
			t.Fatalf("the log did not say %q within 5s", msg)
		}
	}
}

// admit is an Authorize that lets every request through.
func admit(r *http.Request) (*http.Request, func(), error) { return r, func() {}, nil }

// call makes one request to the server at addr and returns its status,
// content type and body, decoded as the API's error.
func call(t *testing.T, addr, path string) (int, string, spec.APIError) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e spec.APIError
	if err := json.Unmarshal(b, &e); err != nil && resp.StatusCode >= 400 {
		t.Fatalf("GET %s: %s with a body that is not the API's JSON error: %q", path, resp.Status, b)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), e
}

// A handler that panics is answered 500 with the API's JSON error, the
// panic is logged, and the server goes on serving.
func TestHandlePanicIs500WithAJSONBody(t *testing.T) {
	log := make(logged, 100)
	mux := http.NewServeMux()
	mux.Handle("/panic", Handle(slog.New(log), admit, func(w http.ResponseWriter, r *http.Request) error {
		panic("a bug in " + r.URL.Path)
	}))
	mux.Handle("/ok", Handle(slog.New(log), admit, func(w http.ResponseWriter, r *http.Request) error {
		return WriteJSON(w, 7, map[string]string{"ok": "yes"})
	}))
	addr := serveLimited(t, mux, Limits{})
	status, ctype, e := call(t, addr, "/panic")
	if status != http.StatusInternalServerError || ctype != "application/json" || e.Error != "internal error" {
		t.Errorf("a panicking handler: %d %s %+v; want 500 application/json {error: internal error}", status, ctype, e)
	}
	log.heard(t, "panic in handler")
	if status, _, _ := call(t, addr, "/ok"); status != http.StatusOK {
		t.Errorf("the next request after a panic: %d, want 200", status)
	}
}

// A handler's error is answered with its status and message, and its
// problems, at most 100 of them; only a 5xx is logged.
func TestHandleRendersTheErrorWithItsStatus(t *testing.T) {
	log := make(logged, 100)
	many := make(spec.Problems, 150)
	for i := range many {
		many[i] = spec.Problem{Field: fmt.Sprintf("groups[%d].count", i), Message: "must be positive"}
	}
	errs := map[string]error{
		"/bad":     BadRequest("index must be a non-negative integer, got %q", "-1"),
		"/invalid": fmt.Errorf("submit: %w", many),
		"/ours":    errors.New("disk on fire"),
	}
	mux := http.NewServeMux()
	for path, err := range errs {
		mux.Handle(path, Handle(slog.New(log), admit, func(w http.ResponseWriter, r *http.Request) error { return err }))
	}
	addr := serveLimited(t, mux, Limits{})
	if status, _, e := call(t, addr, "/bad"); status != http.StatusBadRequest || e.Error != `index must be a non-negative integer, got "-1"` {
		t.Errorf("BadRequest: %d %+v", status, e)
	}
	status, _, e := call(t, addr, "/invalid")
	if status != http.StatusUnprocessableEntity || e.Error != "the job is not valid" || len(e.Problems) != 101 ||
		e.Problems[99].Field != "groups[99].count" || e.Problems[100].Message != "... and 50 more problems" {
		t.Errorf("150 problems: %d %q with %d problems; want 422 listing the first 100 and how many more", status, e.Error, len(e.Problems))
	}
	select {
	case m := <-log:
		t.Errorf("a 4xx was logged: %q", m)
	default:
	}
	if status, _, e := call(t, addr, "/ours"); status != http.StatusInternalServerError || e.Error != "disk on fire" {
		t.Errorf("an error of ours: %d %+v", status, e)
	}
	log.heard(t, "request failed")
}

// Authorize runs before the handler: a refusal is the answer and the
// handler never runs; an admitted request reaches the handler as
// authorize returned it, and what authorize gave to call at its end is
// called (before the answer leaves: the handler does not flush it).
// ?consistent marks the request's context.
func TestHandleAuthorizesFirst(t *testing.T) {
	type who struct{}
	var ran, ended atomic.Int32
	authorize := func(r *http.Request) (*http.Request, func(), error) {
		if r.Header.Get("X-Who") == "" {
			return nil, func() {}, &Error{Status: http.StatusUnauthorized, Message: "say who you are"}
		}
		return r.WithContext(context.WithValue(r.Context(), who{}, r.Header.Get("X-Who"))), func() { ended.Add(1) }, nil
	}
	h := Handle(slog.New(slog.DiscardHandler), authorize, func(w http.ResponseWriter, r *http.Request) error {
		ran.Add(1)
		return WriteJSON(w, 0, map[string]any{"who": r.Context().Value(who{}), "consistent": ConsistentRead(r.Context())})
	})
	addr := serveLimited(t, h, Limits{})
	if status, _, e := call(t, addr, "/"); status != http.StatusUnauthorized || e.Error != "say who you are" || ran.Load() != 0 {
		t.Errorf("refused: %d %+v, handler ran %d times; want 401 and no run", status, e, ran.Load())
	}
	for _, c := range []struct {
		path       string
		consistent bool
	}{{"/", false}, {"/?consistent", true}, {"/?index=3&consistent=", true}} {
		req, _ := http.NewRequest("GET", "http://"+addr+c.path, nil)
		req.Header.Set("X-Who", "alice")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Who        string
			Consistent bool
		}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != 200 || got.Who != "alice" || got.Consistent != c.consistent {
			t.Errorf("GET %s: %s %+v; want 200 from alice, consistent %v", c.path, resp.Status, got, c.consistent)
		}
	}
	if ran.Load() != 3 || ended.Load() != 3 {
		t.Errorf("3 admitted requests: the handler ran %d times and their end was called %d times", ran.Load(), ended.Load())
	}
}

// A request whose context authorize's hook cancels with an *Error (a
// token deleted while it ran) is answered that error while it has not
// begun answering, and just ends once it has.
func TestHandleEndsWithTheCauseOfItsCancellation(t *testing.T) {
	revoked := &Error{Status: http.StatusForbidden, Message: "the request's ACL token was deleted while the request ran"}
	authorize := func(r *http.Request) (*http.Request, func(), error) {
		ctx, cancel := context.WithCancelCause(r.Context())
		time.AfterFunc(100*time.Millisecond, func() { cancel(revoked) })
		return r.WithContext(ctx), func() { cancel(nil) }, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/wait", Handle(slog.New(slog.DiscardHandler), authorize, func(w http.ResponseWriter, r *http.Request) error {
		<-r.Context().Done() // a blocking query waiting
		return r.Context().Err()
	}))
	mux.Handle("/stream", Handle(slog.New(slog.DiscardHandler), authorize, func(w http.ResponseWriter, r *http.Request) error {
		io.WriteString(w, "line 1\n") // a follow that has answered
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		return r.Context().Err()
	}))
	addr := serveLimited(t, mux, Limits{})
	if status, _, e := call(t, addr, "/wait"); status != http.StatusForbidden || e.Error != revoked.Message {
		t.Errorf("a waiting request whose token was revoked: %d %+v; want 403 %q", status, e, revoked.Message)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "line 1\n" {
		t.Errorf("a stream whose token was revoked: %s %q; want it to end after what it sent", resp.Status, b)
	}
}

// QueryOptions reads a blocking query's index and wait: the wait defaults
// to 5 minutes and is capped at 10; a bad value is a 400 that says what
// was expected.
func TestQueryOptions(t *testing.T) {
	cases := []struct {
		query string
		index int64
		wait  time.Duration
		bad   string
	}{
		{"", 0, 5 * time.Minute, ""},
		{"index=42&wait=30s", 42, 30 * time.Second, ""},
		{"index=42&wait=1h", 42, 10 * time.Minute, ""},
		{"index=-1", 0, 0, `index must be a non-negative integer, got "-1"`},
		{"index=x", 0, 0, `index must be a non-negative integer, got "x"`},
		{"wait=soon", 0, 0, `wait must be a duration such as "30s", got "soon"`},
		{"wait=-5s", 0, 0, `wait must be a duration such as "30s", got "-5s"`},
	}
	for _, c := range cases {
		r, _ := http.NewRequest("GET", "/v1/jobs?"+c.query, nil)
		index, wait, err := QueryOptions(r)
		if c.bad != "" {
			status, msg, _ := StatusOf(err)
			if status != http.StatusBadRequest || msg != c.bad {
				t.Errorf("?%s: %d %q; want 400 %q", c.query, status, msg, c.bad)
			}
			continue
		}
		if err != nil || index != c.index || wait != c.wait {
			t.Errorf("?%s: %d %s %v; want %d %s", c.query, index, wait, err, c.index, c.wait)
		}
	}
}

// A JSON error names the line and column of the offending byte.
func TestDecodeStrictSaysWhere(t *testing.T) {
	var v struct{ Name string }
	cases := []struct{ body, want string }{
		{"{\n  \"name\": 3\n}", "the body is not a job: 2:12: json: cannot unmarshal number"},
		{"{\n \"name\": \n}", "the body is not a job: 3:2: invalid character '}'"},
		{"{\n  \"name\": \"web\",\n  \"nmae\": \"x\"\n}", `the body is not a job: json: unknown field "nmae"`},
		{"{\"name\": \"web\"} {}", "the body has data after the JSON object"},
	}
	for _, c := range cases {
		err := DecodeStrict([]byte(c.body), &v, "a job")
		if status, msg, _ := StatusOf(err); status != http.StatusBadRequest || !strings.HasPrefix(msg, c.want) {
			t.Errorf("%q: %d %q; want 400 %q", c.body, status, msg, c.want)
		}
	}
}
