package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

// TestHostileBodiesAreRefusedInBoundedTime is reliability case 25: a body
// nested 10,000 levels deep, one with 100,000 array elements, and one over
// the size limit, sent to every endpoint that takes a body (as the node, so
// that the agent's endpoints read it), are each refused with a 400 or 413
// within 4 s of CPU time, and nothing is written. A job of 100,000 groups is
// well-formed JSON, so it is a 422, in bounded time too.
func TestHostileBodiesAreRefusedInBoundedTime(t *testing.T) {
	hs, reg := testServer(t)
	secret := registerNode(t, hs.URL, "aaaa1111", "10.0.0.1")
	ctx := context.Background()
	before, err := reg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	endpoints := []string{
		"POST /v1/jobs",
		"POST /v1/jobs/plan",
		"POST /v1/validate/job",
		"POST /v1/jobs/parse",
		"POST /v1/jobs/web/revert",
		"POST /v1/nodes",
		"PUT /v1/allocations/abc123/status",
		"PUT /v1/nodes/aaaa1111/allocations/status",
		"PUT /v1/nodes/aaaa1111/usage",
		"PUT /v1/nodes/aaaa1111/eligibility",
		"PUT /v1/nodes/aaaa1111/drain",
	}
	const depth, n = 10000, 100000
	bodies := []struct{ name, body string }{
		{"objects nested 10k deep", strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)},
		{"arrays nested 10k deep", `{"name":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "}"},
		{"arrays nested past encoding/json's limit", strings.Repeat("[", depth+1) + strings.Repeat("]", depth+1)},
		{"100k-element array", "[" + strings.Repeat("0,", n-1) + "0]"},
		{"100k-element array in a field", `{"groups":[` + strings.Repeat("0,", n-1) + `0],"allocs":[` + strings.Repeat("{},", n-1) + "{}]}"},
		{"over the size limit", `{"name":"` + strings.Repeat("a", inputlimit.MaxBytes) + `"}`},
	}
	// What is bounded is the work a body costs: the CPU time of this
	// process (client and server) while the request runs, which other
	// tests loading the machine do not inflate as they do the wall clock.
	// A request that hangs fails at the client's timeout.
	hc := &http.Client{Timeout: time.Minute * raceSlowdown}
	send := func(endpoint, body string) (int, string, time.Duration) {
		t.Helper()
		method, path, _ := strings.Cut(endpoint, " ")
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		req.Header.Set(client.NodeSecretHeader, secret)
		start := testkit.ProcessCPU(t)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e spec.APIError
		json.Unmarshal(b, &e)
		return resp.StatusCode, e.Error, testkit.ProcessCPU(t) - start
	}
	refuseWithin, validateWithin := 4*time.Second*raceSlowdown, 10*time.Second*raceSlowdown
	for _, b := range bodies {
		for _, ep := range endpoints {
			status, msg, took := send(ep, b.body)
			if (status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge) || msg == "" || took > refuseWithin {
				t.Errorf("%s, %s: %d %q after %v of CPU; want a 400 or 413 that says why within %s", ep, b.name, status, msg, took, refuseWithin)
			}
		}
	}
	groups := `{"name":"web","groups":[` + strings.Repeat("{},", n-1) + "{}]}"
	for _, ep := range endpoints[:3] {
		// About a second: it answers every problem of every group
		// (200,000 of them); what must not come back is the quadratic
		// time this took before (12 s, minutes with a restart block).
		status, msg, took := send(ep, groups)
		if status != http.StatusUnprocessableEntity || took > validateWithin {
			t.Errorf("%s, a job of 100k groups: %d %q after %v of CPU; want a 422 within %s", ep, status, msg, took, validateWithin)
		}
	}
	if after, _ := reg.Revision(ctx); after != before {
		t.Fatalf("refused bodies wrote: revision %d -> %d", before, after)
	}
}

// TestDeepInputIsRefusedAndTheServerStaysUp: an ACL policy whose HCL
// nests 60,000 levels deep, put through a real server (TLS, ACLs on),
// killed the server with "fatal error: stack overflow", which no recover
// catches. It, one nested with operators, and a job body nested as deep
// are each a 400 that names the limit; nothing is stored and the server
// answers the next request.
func TestDeepInputIsRefusedAndTheServerStaysUp(t *testing.T) {
	f := newAuthFixture(t)
	const n = 60000
	policy := func(capabilities string) string {
		b, _ := json.Marshal(spec.ACLPolicy{Rules: `namespace "default" { capabilities = ` + capabilities + ` }`})
		return string(b)
	}
	cases := []struct{ what, method, path, body, want string }{
		{"a policy nested in brackets", "PUT", "/v1/acl/policies/deep",
			policy(strings.Repeat("[", n) + strings.Repeat("]", n)),
			"the policy's rules are not valid: deep: the policy nests 60001 levels deep (line 1, column 101); the limit is 64"},
		{"a policy nested with operators", "PUT", "/v1/acl/policies/deep",
			policy(strings.Repeat("!", n) + "true"),
			"the policy's rules are not valid: deep: the policy nests 60001 levels deep (line 1, column 101); the limit is 64"},
		{"a job nested in arrays", "POST", "/v1/jobs",
			`{"name":"deep","meta":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`,
			"the body nests 60001 levels deep (line 1, column 86); the limit is 64"},
	}
	for _, c := range cases {
		st, body := f.call("management", c.method, c.path, c.body)
		var e spec.APIError
		json.Unmarshal([]byte(body), &e)
		if st != http.StatusBadRequest || e.Error != c.want {
			t.Errorf("%s: %d %s; want 400 %q", c.what, st, body, c.want)
		}
	}
	if st, body := f.call("management", "GET", "/v1/acl/policies/deep", ""); st != http.StatusNotFound {
		t.Errorf("GET the refused policy: %d %s; want 404", st, body)
	}
	if st, body := f.call("management", "GET", "/v1/jobs/deep", ""); st != http.StatusNotFound {
		t.Errorf("GET the refused job: %d %s; want 404", st, body)
	}
}
