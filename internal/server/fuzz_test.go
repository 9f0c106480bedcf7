package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/spec"
)

// The API's decoders under fuzzing (issue 8, reliability cases 25, 26 and
// 32). FuzzAPIBody runs every body the API accepts through the handlers'
// own decoding, with no etcd, so it is fast; FuzzAgentReport sends bodies
// to the agent's endpoints of a real server on an embedded etcd, a few
// round trips per input, to check what a refusal leaves behind. Their
// nasty seeds (deep nesting, huge arrays, NUL bytes, invalid UTF-8,
// duplicate keys, trailing garbage) are in testdata/fuzz/<name>/; .ci/fuzz
// runs both for a bounded time.

// apiBodies is every request body the API decodes, as its handler decodes
// it: httpapi.ReadBody's size limit, then strict JSON (decodeJob for a job, which
// canonicalizes and validates too). Heartbeats, promote and fail take no
// body. A new body type belongs here.
var apiBodies = []struct {
	endpoint string
	decode   func(w http.ResponseWriter, r *http.Request) (any, error)
}{
	{"POST /v1/jobs, /v1/jobs/plan, /v1/validate/job", func(w http.ResponseWriter, r *http.Request) (any, error) {
		job, err := decodeJob(w, r)
		if err == nil {
			if ps := job.Validate(); len(ps) > 0 {
				return nil, errorf("decodeJob returned a job that does not validate: %v", ps)
			}
		}
		return job, err
	}},
	{"POST /v1/nodes", strictBody[spec.Node]("a node")},
	{"PUT /v1/allocations/{id}/status", strictBody[spec.AllocStatusUpdate]("an allocation status update")},
	{"PUT /v1/nodes/{id}/allocations/status", strictBody[spec.NodeStatusReport]("a status report")},
	{"PUT /v1/nodes/{id}/usage", strictBody[spec.NodeUsage]("a node usage report")},
	{"PUT /v1/nodes/{id}/eligibility", strictBody[eligibilityRequest]("an eligibility request")},
	{"PUT /v1/nodes/{id}/drain", strictBody[drainRequest]("a drain request")},
	{"POST /v1/jobs/{name}/revert", strictBody[revertRequest]("a revert request")},
	{"PUT /v1/acl/policies/{name}", func(w http.ResponseWriter, r *http.Request) (any, error) {
		return decodePolicy(w, r, "fuzz")
	}},
}

func strictBody[T any](what string) func(w http.ResponseWriter, r *http.Request) (any, error) {
	return func(w http.ResponseWriter, r *http.Request) (any, error) {
		body, err := httpapi.ReadBody(w, r)
		if err != nil {
			return nil, err
		}
		v := new(T)
		if err := httpapi.DecodeStrict(body, v, what); err != nil {
			return nil, err
		}
		return v, nil
	}
}

// fuzzBugError is a broken promise of a decoder: not a client error.
type fuzzBugError string

func (e fuzzBugError) Error() string { return string(e) }

func errorf(format string, args ...any) error { return fuzzBugError(fmt.Sprintf(format, args...)) }

// decodeAPIBody runs body through decode as a request would.
func decodeAPIBody(decode func(http.ResponseWriter, *http.Request) (any, error), body []byte) (any, error) {
	r := httptest.NewRequest("PUT", "/v1/fuzz", bytes.NewReader(body))
	return decode(httptest.NewRecorder(), r)
}

// FuzzAPIBody: for every body type, arbitrary bytes are refused with a 4xx
// that says why, or decode into a value whose JSON (what the server and
// the client send) decodes again to the same JSON. Never a panic, never a
// 5xx.
func FuzzAPIBody(f *testing.F) {
	for i := range apiBodies {
		k := uint8(i)
		f.Add([]byte(goodJob), k)
		f.Add([]byte(`{"job":`+goodJob+`,"allocs":[]}`), k)
		f.Add([]byte(`{"id":"aaaa1111","name":"alpha","address":"http://10.0.0.1:4647","attributes":{"os":"linux"},"meta":{"rack":"r1"},"resources":{"cpu":1000,"memory":1000,"disk":100},"drivers":["exec","raw_exec"],"min_dynamic_port":20000,"max_dynamic_port":20100}`), k)
		f.Add([]byte(`{"node_id":"n1","status":{"client_status":"running","tasks":{"t":{"state":"running"}},"update_time":"2026-01-02T03:04:05Z"}}`), k)
		f.Add([]byte(`{"allocs":[{"id":"abc123","status":{"client_status":"failed","description":"exit 1"}},{"id":"def456","status":{"client_status":"running","health":"healthy","deployment_health":{"healthy":true}}}]}`), k)
		f.Add([]byte(`{"node_id":"aaaa1111","time":"2026-01-02T03:04:05Z","tasks":{"cpu":250,"memory":300},"allocs":{"x":{"t":{"cpu":250,"memory":300}}}}`), k)
		f.Add([]byte(`{"eligible":false}`), k)
		f.Add([]byte(`{"enable":true,"deadline":"1h"}`), k)
		f.Add([]byte(`{"enable":false,"keep_ineligible":true}`), k)
		f.Add([]byte(`{"version":2,"check_index":17}`), k)
		f.Add([]byte(`{"name":"fuzz","rules":"namespace \"default\" { capabilities = [\"read\"] }"}`), k)
	}
	f.Fuzz(func(t *testing.T, body []byte, kind uint8) {
		k := apiBodies[int(kind)%len(apiBodies)]
		start := time.Now()
		v, err := decodeAPIBody(k.decode, body)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: decoding %d bytes took %v", k.endpoint, len(body), d)
		}
		if err != nil {
			if _, ok := err.(fuzzBugError); ok {
				t.Fatalf("%s: %v", k.endpoint, err)
			}
			status, msg, _ := httpapi.StatusOf(err)
			if status < 400 || status > 499 || msg == "" {
				t.Fatalf("%s: refused with %d %q, want a 4xx that says why (%#v)", k.endpoint, status, msg, err)
			}
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: the decoded body does not encode: %v", k.endpoint, err)
		}
		again, err := decodeAPIBody(k.decode, out)
		if err != nil {
			t.Fatalf("%s: the decoded body, encoded, is refused: %v\n%s", k.endpoint, err, out)
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("%s: decoding is not stable:\n%s\n%s", k.endpoint, out, out2)
		}
	})
}

// FuzzAgentReport sends arbitrary bodies to each endpoint an agent calls,
// as that node (its secret), through a real server's handler on an
// embedded etcd: never a panic or a 5xx, and a refused report writes
// nothing (the registry's revision, which every write moves, stays put;
// that covers the node's record and the alloc's status). Each input costs
// a few etcd round trips, so its seeds are few; FuzzAPIBody covers the
// decoding itself fast.
func FuzzAgentReport(f *testing.F) {
	// An hour's TTL: no lease may expire (a write) between the revision
	// read before a request and after it.
	e := apiServerWith(f, Config{NodeTTL: time.Hour})
	h, reg := e.srv.Handler(nil), e.srv.reg
	ctx := context.Background()
	const node, alloc = "fuzz1111", "fa11fa11"
	w := serve(h, "POST", "/v1/nodes", "", []byte(`{"id":"`+node+`","name":"fuzz","resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`))
	var nr spec.NodeRegistration
	if err := json.Unmarshal(w.Body.Bytes(), &nr); w.Code != 200 || err != nil || nr.Secret == "" {
		f.Fatalf("register: %d %s", w.Code, w.Body)
	}
	secret := nr.Secret
	now := time.Now().UTC()
	if _, err := e.l.Commit(ctx, &spec.Plan{Allocs: []*spec.Alloc{{
		ID: alloc, Name: "web.g[0]", Job: "web", JobVersion: 1, Group: "g", NodeID: node, NodeName: "fuzz",
		Tasks:   []*spec.Task{{Name: "t", Driver: "exec", Config: spec.TaskConfig{Command: "/bin/true"}}},
		JobType: spec.JobService, DesiredStatus: spec.DesiredRun, CreateTime: now, ModifyTime: now,
	}}}); err != nil {
		f.Fatal(err)
	}
	endpoints := []struct{ method, path string }{
		{"PUT", "/v1/allocations/" + alloc + "/status"},
		{"PUT", "/v1/nodes/" + node + "/allocations/status"},
		{"PUT", "/v1/nodes/" + node + "/usage"},
		{"PUT", "/v1/nodes/" + node + "/heartbeat"},
		{"POST", "/v1/nodes"},
	}
	for i := range endpoints {
		k := uint8(i)
		f.Add([]byte(`{"node_id":"`+node+`","status":{"client_status":"running","tasks":{"t":{"state":"running"}}}}`), k)
		f.Add([]byte(`{"allocs":[{"id":"`+alloc+`","status":{"client_status":"running"}},{"id":"ghost","status":{"client_status":"failed"}}]}`), k)
		f.Add([]byte(`{"node_id":"`+node+`","tasks":{"cpu":250,"memory":300}}`), k)
		f.Add([]byte(`{"id":"`+node+`","name":"fuzz","resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`), k)
		f.Add([]byte(`{"node_id":"`+node+`","status":{"client_status":"lost"}}`), k)
	}
	f.Fuzz(func(t *testing.T, body []byte, endpoint uint8) {
		ep := endpoints[int(endpoint)%len(endpoints)]
		before, err := reg.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		w := serve(h, ep.method, ep.path, secret, body)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s %s: %d bytes took %v", ep.method, ep.path, len(body), d)
		}
		if w.Code < 200 || w.Code > 499 {
			t.Fatalf("%s %s: %d %s", ep.method, ep.path, w.Code, w.Body)
		}
		refused := w.Code >= 400
		if w.Code == 200 && ep.path == endpoints[1].path {
			// A batch whose every entry is refused is a refusal too.
			var rep spec.NodeStatusReport
			var res spec.NodeStatusResult
			json.Unmarshal(body, &rep)
			json.Unmarshal(w.Body.Bytes(), &res)
			refused = len(res.Refused) == len(rep.Allocs)
		}
		if !refused {
			return
		}
		after, err := reg.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Fatalf("%s %s: refused with %d (%s) but wrote: revision %d -> %d", ep.method, ep.path, w.Code, bytes.TrimSpace(w.Body.Bytes()), before, after)
		}
	})
}

// serve sends one request to h, as node secret when secret is not "".
func serve(h http.Handler, method, path, secret string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	if secret != "" {
		r.Header.Set(client.NodeSecretHeader, secret)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
