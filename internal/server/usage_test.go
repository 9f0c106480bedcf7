package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestNodeUsageProxiesToTheAgent(t *testing.T) {
	hs, _ := testServer(t)
	want := spec.NodeUsage{NodeID: "node-a", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Tasks:  spec.Usage{CPU: 300, MemoryMB: 70},
		Allocs: map[string]map[string]spec.Usage{"a1": {"web": {CPU: 250, MemoryMB: 64}, "side": {CPU: 50, MemoryMB: 6}}}}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/client/usage" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(want)
	}))
	defer agent.Close()
	register := func(id, addr string) {
		status, e, _ := do(t, "POST", hs.URL+"/v1/nodes", `{"id":"`+id+`","name":"`+id+`","address":"`+addr+`","resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`)
		if status != 200 {
			t.Fatalf("register %s: %d %s", id, status, e.Error)
		}
	}
	register("node-a", agent.URL)
	register("node-b", "http://127.0.0.1:1") // nothing listens there

	resp, err := http.Get(hs.URL + "/v1/nodes/node-a/usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got spec.NodeUsage
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET usage: %s, %v", resp.Status, err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("usage (-agent's +proxied):\n%s", d)
	}

	for _, c := range []struct {
		path   string
		status int
		msg    string
	}{
		{"/v1/nodes/node-b/usage", 502, "cannot reach node node-b at http://127.0.0.1:1 for usage"},
		{"/v1/nodes/nope/usage", 404, "nope"},
	} {
		status, e, _ := do(t, "GET", hs.URL+c.path, "")
		if status != c.status || !strings.Contains(e.Error, c.msg) {
			t.Errorf("GET %s: %d %q, want %d with %q", c.path, status, e.Error, c.status, c.msg)
		}
	}
}
