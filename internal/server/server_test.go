package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// testServer runs a real server on a real embedded etcd.
func testServer(t *testing.T) (*httptest.Server, *registry.Registry) {
	t.Helper()
	hs, reg, _ := testServerSrv(t)
	return hs, reg
}

// testServerSrv is testServer with the server itself, for a test that
// looks inside it.
func testServerSrv(t *testing.T) (*httptest.Server, *registry.Registry, *Server) {
	t.Helper()
	return testServerWith(t, func(*Config) {})
}

// testServerWith is testServerSrv with the server's configuration as set
// changes it.
func testServerWith(t *testing.T, set func(*Config)) (*httptest.Server, *registry.Registry, *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Registry: reg, ID: "test", Logger: log}
	set(&cfg)
	srv := New(cfg)
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		reg.Close()
		emb.Close()
	})
	// Settle: the election key and the leader's Elected event are
	// writes; measure after them.
	deadline := time.Now().Add(10 * time.Second)
	for !srv.loop.IsLeader() || !elected(ctx, reg) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not become leader and record it within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return hs, reg, srv
}

// elected reports whether the history holds a leader's Elected event.
func elected(ctx context.Context, reg *registry.Registry) bool {
	evs, _, err := reg.ListEvents(ctx, registry.EventQuery{})
	return err == nil && slices.ContainsFunc(evs, func(e spec.Event) bool { return e.Topic == spec.TopicLeader && e.Type == "Elected" })
}

const goodJob = `{"name":"web","groups":[{"name":"g","count":2,"tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"},"resources":{"cpu":10,"memory":10}}]}]}`

func do(t *testing.T, method, url, body string) (int, spec.APIError, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e spec.APIError
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &e)
	return resp.StatusCode, e, resp.Header
}

func TestBadInputIs4xxAndWritesNothing(t *testing.T) {
	hs, reg := testServer(t)
	ctx := context.Background()
	before, err := reg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	huge := `{"name":"web","meta":{"x":"` + strings.Repeat("a", inputlimit.MaxBytes) + `"},"groups":[]}`
	cases := []struct {
		name, method, path, body string
		status                   int
		contains                 []string
	}{
		{"oversize body", "POST", "/v1/jobs", huge, 413, []string{"limit"}},
		{"not json", "POST", "/v1/jobs", "job web {", 400, []string{"not a JSON object"}},
		{"syntax error position", "POST", "/v1/jobs", "{\n\"name\": \"web\",,\n}", 400, []string{"2:"}},
		{"unknown field", "POST", "/v1/jobs", `{"name":"web","colour":"red","groups":[]}`, 400, []string{"colour"}},
		{"unknown nested field", "POST", "/v1/jobs", strings.Replace(goodJob, `"count":2`, `"count":2,"cnt":3`, 1), 400, []string{"cnt"}},
		{"wrong type", "POST", "/v1/jobs", strings.Replace(goodJob, `"count":2`, `"count":"two"`, 1), 400, []string{"count"}},
		{"trailing data", "POST", "/v1/jobs", goodJob + `{}`, 400, nil},
		{"invalid job, every problem", "POST", "/v1/jobs",
			strings.Replace(strings.Replace(goodJob, `"count":2`, `"count":-1`, 1), `"exec"`, `"no pe"`, 1), 422,
			[]string{"groups[0].count", "groups[0].tasks[0].driver"}},
		{"job name with slash", "POST", "/v1/jobs", strings.Replace(goodJob, `"web"`, `"a/b"`, 1), 422, []string{"name"}},
		{"job name with dots", "POST", "/v1/jobs", strings.Replace(goodJob, `"web"`, `"a..b"`, 1), 422, []string{"name"}},
		{"bad check index", "POST", "/v1/jobs?check_index=x", goodJob, 400, []string{"check_index"}},
		{"path id with slash", "DELETE", "/v1/jobs/a%2Fb", "", 400, []string{"job name"}},
		{"path id with space", "GET", "/v1/jobs/a%20b", "", 400, []string{"job name"}},
		{"path id dotdot", "DELETE", "/v1/jobs/%2E%2E", "", 400, []string{"job name"}},
		{"path id control char", "GET", "/v1/jobs/a%00b", "", 400, []string{"job name"}},
		{"path id too long", "GET", "/v1/jobs/" + strings.Repeat("a", 200), "", 400, []string{"limit"}},
		{"unknown job", "DELETE", "/v1/jobs/ghost", "", 404, []string{"ghost"}},
		{"bad index", "GET", "/v1/jobs?index=-3", "", 400, []string{"index"}},
		{"bad wait", "GET", "/v1/jobs?index=1&wait=soon", "", 400, []string{"wait"}},
		{"status for unknown alloc", "PUT", "/v1/allocations/abc123/status", `{"node_id":"n1","status":{"client_status":"running"}}`, 404, nil},
		{"status with bad client status", "PUT", "/v1/allocations/abc123/status", `{"node_id":"n1","status":{"client_status":"lost"}}`, 400, []string{"client_status"}},
		{"node with bad id", "POST", "/v1/nodes", `{"id":"../x","name":"n","resources":{"cpu":1,"memory":1},"drivers":[]}`, 422, []string{"id"}},
		{"node with unknown field", "POST", "/v1/nodes", `{"id":"n","name":"n","cores":3}`, 400, []string{"cores"}},
		{"no such endpoint", "GET", "/v1/nope", "", 404, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, e, _ := do(t, c.method, hs.URL+c.path, c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d (%+v)", status, c.status, e)
			}
			all := e.Error
			for _, p := range e.Problems {
				all += "\n" + p.Field + ": " + p.Message
			}
			if e.Error == "" {
				t.Errorf("no error message in the body")
			}
			for _, want := range c.contains {
				if !strings.Contains(all, want) {
					t.Errorf("error %q does not mention %q", all, want)
				}
			}
		})
	}
	after, _ := reg.Revision(ctx)
	if after != before {
		t.Fatalf("bad requests wrote to the registry: revision %d -> %d", before, after)
	}
}

func TestSubmitIsIdempotentAndCheckIndexConflicts(t *testing.T) {
	hs, reg := testServer(t)
	post := func(path, body string) (int, spec.SubmitResponse) {
		resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r spec.SubmitResponse
		json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	status, first := post("/v1/jobs", goodJob)
	if status != 200 || !first.Changed || first.Job.Version != 1 {
		t.Fatalf("first submit: %d %+v", status, first)
	}
	// Let the leader's pass for version 1 land, then measure.
	time.Sleep(300 * time.Millisecond)
	rev, _ := reg.Revision(context.Background())
	status, again := post("/v1/jobs", goodJob)
	if status != 200 || again.Changed || again.Job.Version != 1 {
		t.Fatalf("same spec again: %d %+v, want unchanged version 1", status, again)
	}
	if r2, _ := reg.Revision(context.Background()); r2 != rev {
		t.Fatalf("an unchanged submit wrote to the registry: revision %d -> %d", rev, r2)
	}
	changed := strings.Replace(goodJob, `"count":2`, `"count":3`, 1)
	status, _ = post("/v1/jobs?check_index=1", changed)
	if status != http.StatusConflict {
		t.Fatalf("stale check_index: status %d, want 409", status)
	}
	status, v2 := post("/v1/jobs?check_index="+strconv.FormatInt(again.Job.ModifyIndex, 10), changed)
	if status != 200 || v2.Job.Version != 2 {
		t.Fatalf("matching check_index: %d %+v", status, v2)
	}
}

// A check index on a job that does not exist says so, and how to create
// it, instead of "changed since"; nothing is written.
func TestCheckIndexOnAMissingJob(t *testing.T) {
	hs, reg := testServer(t)
	status, e, _ := do(t, "POST", hs.URL+"/v1/jobs?check_index=5", goodJob)
	if status != http.StatusConflict || !strings.Contains(e.Error, `job "web" does not exist`) || !strings.Contains(e.Error, "without --check-index") ||
		strings.Contains(e.Error, "changed since") {
		t.Errorf("check_index on a missing job: %d %q, want a 409 saying it does not exist and how to create it", status, e.Error)
	}
	if _, err := reg.GetJob(context.Background(), "web"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("job web after the refused submit: %v, want not found", err)
	}
}

// With its etcd stopped, a request that must reach etcd waits out the
// registry's deadline and is a 503 that says what is wrong and what to
// look at, not gRPC's words.
func TestEtcdGoneIs503ThatSaysWhatToDo(t *testing.T) {
	addr, _, emb := limitedAPIServer(t, Config{}, httpapi.Limits{})
	emb.Close()
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Post("http://"+addr+"/v1/jobs", "application/json", strings.NewReader(goodJob))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e spec.APIError
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Error, "did not answer within") ||
		!strings.Contains(e.Error, "quorum") || strings.Contains(e.Error, "rpc error") {
		t.Errorf("submit with etcd stopped: %s %q, want a 503 saying etcd did not answer in time and what to check", resp.Status, e.Error)
	}
}

func TestBlockingQueryWakesOnChange(t *testing.T) {
	hs, _ := testServer(t)
	resp, err := http.Get(hs.URL + "/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	index, _ := strconv.ParseInt(resp.Header.Get("X-Drover-Index"), 10, 64)
	if index == 0 {
		t.Fatal("no X-Drover-Index on a list")
	}

	// Nothing changes: the query returns after its wait, not before.
	start := time.Now()
	resp, err = http.Get(fmt.Sprintf("%s/v1/jobs?index=%d&wait=300ms", hs.URL, index))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("blocking query returned after %s with no change; want ~300ms", d)
	}

	// A submit wakes it long before its 30 s wait.
	got := make(chan []spec.JobListEntry, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("%s/v1/jobs?index=%d&wait=30s", hs.URL, index))
		if err != nil {
			got <- nil
			return
		}
		defer resp.Body.Close()
		var jobs []spec.JobListEntry
		json.NewDecoder(resp.Body).Decode(&jobs)
		got <- jobs
	}()
	time.Sleep(100 * time.Millisecond)
	http.Post(hs.URL+"/v1/jobs", "application/json", bytes.NewReader([]byte(goodJob)))
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0].Name != "web" {
			t.Fatalf("woken query returned %+v", jobs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocking query did not wake on a submit")
	}
}

// With no node, a job is pending and says why; a node that fits arrives and
// the job is placed without being submitted again.
func TestPlacedAsSoonAsCapacityAppears(t *testing.T) {
	hs, _ := testServer(t)
	http.Post(hs.URL+"/v1/jobs", "application/json", strings.NewReader(goodJob))
	var st spec.JobStatus
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, _ := http.Get(hs.URL + "/v1/jobs/web")
		st = spec.JobStatus{}
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if len(st.Failures) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(st.Failures) != 1 || st.Failures[0].String() != "0/0 nodes fit: no ready nodes" || st.Failures[0].Missing != 2 {
		t.Fatalf("want a failure saying no nodes, got %+v", st.Failures)
	}
	node := `{"id":"n1","name":"n1","resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`
	if status, e, _ := do(t, "POST", hs.URL+"/v1/nodes", node); status != 200 {
		t.Fatalf("register node: %d %+v", status, e)
	}
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var allocs []*spec.Alloc
		call(t, "GET", hs.URL+"/v1/jobs/web/allocations", "", &allocs)
		if len(allocs) == 2 {
			for _, a := range allocs {
				if a.NodeID != "n1" || a.DesiredStatus != spec.DesiredRun {
					t.Fatalf("alloc %+v", a)
				}
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the job was not placed after a node appeared")
}

// A node's secret: given once, required after, and a node cannot act as
// another (issue 3: "Node secret misuse: 403").
func TestNodeSecretMisuseIs403(t *testing.T) {
	hs, _ := testServer(t)
	req := func(method, path, secret, body string) (int, []byte) {
		t.Helper()
		r, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if secret != "" {
			r.Header.Set("X-Drover-Node-Secret", secret)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	register := func(id, secret string) (int, spec.NodeRegistration) {
		status, b := req("POST", "/v1/nodes", secret, `{"id":"`+id+`","name":"`+id+`","resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`)
		var reg spec.NodeRegistration
		json.Unmarshal(b, &reg)
		return status, reg
	}
	status, a := register("node-a", "")
	if status != 200 || len(a.Secret) < 32 {
		t.Fatalf("first registration: %d, secret %q", status, a.Secret)
	}
	_, b := register("node-b", "")
	if b.Secret == "" || b.Secret == a.Secret {
		t.Fatalf("node-b's secret %q", b.Secret)
	}
	// The secret is never shown again, nor anywhere in the API.
	if status, again := register("node-a", a.Secret); status != 200 || again.Secret != "" {
		t.Fatalf("re-registration with the secret: %d, secret shown again: %q", status, again.Secret)
	}
	for _, path := range []string{"/v1/nodes", "/v1/nodes/node-a"} {
		if _, body := req("GET", path, "", ""); strings.Contains(string(body), a.Secret) || strings.Contains(string(body), hashSecret(a.Secret)) {
			t.Fatalf("%s reveals the secret or its hash", path)
		}
	}
	forbidden := []struct {
		name, method, path, secret, body string
	}{
		{"register node-a without its secret", "POST", "/v1/nodes", "", `{"id":"node-a","name":"x","resources":{"cpu":1,"memory":1},"drivers":[]}`},
		{"register node-a with node-b's secret", "POST", "/v1/nodes", b.Secret, `{"id":"node-a","name":"x","resources":{"cpu":1,"memory":1},"drivers":[]}`},
		{"heartbeat without a secret", "PUT", "/v1/nodes/node-a/heartbeat", "", ""},
		{"heartbeat as node-a with node-b's secret", "PUT", "/v1/nodes/node-a/heartbeat", b.Secret, ""},
		{"read node-a's assignments as node-b", "GET", "/v1/nodes/node-a/allocations", b.Secret, ""},
		{"report for node-a as node-b", "PUT", "/v1/nodes/node-a/allocations/status", b.Secret, `{"allocs":[]}`},
		{"single report for node-a as node-b", "PUT", "/v1/allocations/abcd1234/status", b.Secret, `{"node_id":"node-a","status":{"client_status":"running"}}`},
	}
	for _, c := range forbidden {
		if status, body := req(c.method, c.path, c.secret, c.body); status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403: %s", c.name, status, body)
		}
	}
	// The right secret works.
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/nodes/node-a/heartbeat", ""},
		{"GET", "/v1/nodes/node-a/allocations", ""},
		{"PUT", "/v1/nodes/node-a/allocations/status", `{"allocs":[]}`},
	} {
		if status, body := req(c.method, c.path, a.Secret, c.body); status/100 != 2 {
			t.Errorf("%s %s with node-a's secret: %d %s", c.method, c.path, status, body)
		}
	}
	// A batch naming an allocation twice is refused whole, saying where.
	twice := `{"allocs":[{"id":"abcd1234","status":{"client_status":"running"}},{"id":"abcd1234","status":{"client_status":"running"}}]}`
	if status, body := req("PUT", "/v1/nodes/node-a/allocations/status", a.Secret, twice); status != http.StatusBadRequest || !strings.Contains(string(body), "allocs[1].id") {
		t.Errorf("a batch naming an allocation twice: %d %s, want 400 naming allocs[1].id", status, body)
	}
}

// A first registration may bring the node's secret (an agent makes it and
// keeps it before sending): it is admitted without a secret given back,
// admitted again when sent again (its first answer lost), and the node
// refuses any other secret. A secret too short or not of the allowed
// characters is a 400 that leaves the node ID free.
func TestRegistrationBringsItsSecret(t *testing.T) {
	hs, _ := testServer(t)
	register := func(id, secret string) (int, spec.NodeRegistration, string) {
		t.Helper()
		r, _ := http.NewRequest("POST", hs.URL+"/v1/nodes", strings.NewReader(`{"id":"`+id+`","name":"`+id+`","resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`))
		if secret != "" {
			r.Header.Set("X-Drover-Node-Secret", secret)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var reg spec.NodeRegistration
		json.Unmarshal(b, &reg)
		return resp.StatusCode, reg, string(b)
	}
	mine := strings.Repeat("ab12", 16)
	for _, what := range []string{"first", "sent again"} {
		if status, reg, body := register("node-a", mine); status != 200 || reg.Secret != "" {
			t.Fatalf("%s registration with its own secret: %d, secret given %q: %s", what, status, reg.Secret, body)
		}
	}
	if status, _, body := register("node-a", strings.Repeat("cd34", 16)); status != http.StatusForbidden {
		t.Fatalf("registration with another secret: %d, want 403: %s", status, body)
	}
	for _, bad := range []string{"short", strings.Repeat("x", 300), strings.Repeat("a", 31) + "!", strings.Repeat("é", 20)} {
		status, _, body := register("node-b", bad)
		if status != http.StatusBadRequest || !strings.Contains(body, "X-Drover-Node-Secret") {
			t.Errorf("registration with secret %q: %d, want a 400 naming the header: %s", bad, status, body)
		}
	}
	if status, reg, body := register("node-b", ""); status != 200 || len(reg.Secret) < 32 {
		t.Fatalf("node-b after refused secrets: %d, secret %q: %s", status, reg.Secret, body)
	}
}

// The heartbeat interval a server gives: a fifth of the node TTL, or, past
// MaxHeartbeatsPerSecond x that many nodes, one that keeps them under the
// bound, with a TTL five times it.
func TestHeartbeatTimingScalesWithNodes(t *testing.T) {
	for _, c := range []struct {
		nodes, perSecond int
		every            time.Duration
	}{
		{0, 1000, time.Second},
		{1, 1000, time.Second},
		{1000, 1000, time.Second},
		{2000, 1000, 2 * time.Second},
		{10000, 1000, 10 * time.Second},
		{10000, 50, 200 * time.Second},
	} {
		got := heartbeatTiming(c.nodes, c.perSecond, DefaultNodeTTL)
		if got.HeartbeatInterval.Std() != c.every || got.NodeTTL.Std() != 5*c.every {
			t.Errorf("%d nodes at most %d/s: every %s, TTL %s; want %s, %s", c.nodes, c.perSecond, got.HeartbeatInterval, got.NodeTTL, c.every, 5*c.every)
		}
	}
}

// A server past its heartbeat bound tells its nodes, in their
// registrations and heartbeats' answers, to heartbeat less often, and
// keeps each node up for the longer TTL it gave: a node silent for longer
// than the configured TTL, but not its own, is not down; one silent for
// its own is.
func TestServerSlowsHeartbeatsOfManyNodes(t *testing.T) {
	const floor = time.Second // every 200ms
	hs, _, _ := testServerWith(t, func(c *Config) { c.NodeTTL, c.MaxHeartbeatsPerSecond = floor, 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nodes []*client.Client
	var regs []*spec.NodeRegistration
	for i := range 4 {
		c, err := client.New(hs.URL)
		if err != nil {
			t.Fatal(err)
		}
		c.SetNodeSecret(strings.Repeat("ab", 16) + strconv.Itoa(i))
		id := "n" + strconv.Itoa(i)
		reg, err := c.RegisterNode(ctx, &spec.Node{ID: id, Name: id, Resources: spec.Resources{CPU: 1000, MemoryMB: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		nodes, regs = append(nodes, c), append(regs, reg)
	}
	// Registered with 0, 1, 2, 3 nodes before them: the floor, then 2/s.
	for i, want := range []time.Duration{floor / 5, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		if got := regs[i].HeartbeatInterval.Std(); got != want || regs[i].NodeTTL.Std() != 5*want {
			t.Errorf("registration %d: every %s, TTL %s; want %s, %s", i, got, regs[i].NodeTTL, want, 5*want)
		}
	}
	beat, err := nodes[0].Heartbeat(ctx, "n0")
	if err != nil {
		t.Fatal(err)
	}
	if beat.HeartbeatInterval.Std() != 2*time.Second || beat.NodeTTL.Std() != 10*time.Second {
		t.Fatalf("n0's heartbeat among 4 nodes: every %s, TTL %s; want 2s, 10s", beat.HeartbeatInterval, beat.NodeTTL)
	}
	// n3 was given 7.5s: up after twice the configured TTL of silence,
	// down within its own TTL and a margin.
	silent := time.Now()
	for time.Since(silent) < 2*floor {
		n, err := nodes[3].Node(ctx, "n3")
		if err != nil {
			t.Fatal(err)
		}
		if n.Status != spec.NodeReady {
			t.Fatalf("n3 is %s %s into its silence; its TTL is %s", n.Status, time.Since(silent).Round(time.Millisecond), regs[3].NodeTTL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		n, err := nodes[3].Node(ctx, "n3")
		if err != nil {
			t.Fatal(err)
		}
		if n.Status == spec.NodeDown {
			break
		}
		if time.Since(silent) > regs[3].NodeTTL.Std()+5*time.Second {
			t.Fatalf("n3 still up %s into its silence; its TTL is %s", time.Since(silent).Round(time.Millisecond), regs[3].NodeTTL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
