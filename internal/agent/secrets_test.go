package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

// syncBuffer is a log sink the test reads back.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Case 38: a task's env values and the node's secret appear in no log line
// (server and agent, at debug level), no alloc status or event, and no API
// error body, even when the task fails to start in ways whose errors
// would quote them (a PATH holding the secret), restarts and gives up.
func TestSecretsStayOutOfLogsEventsAndErrors(t *testing.T) {
	secret := "s3cr3t-" + rand.Text()
	var srvLog, agLog syncBuffer
	c := newClusterLog(t, slog.New(slog.NewTextHandler(&srvLog, &slog.HandlerOptions{Level: slog.LevelDebug})))
	dataDir := t.TempDir()
	ag := c.startAgentWith(agent.Config{
		DataDir: dataDir,
		Drivers: []driver.Driver{execdriver.New("exec"), execdriver.New("raw_exec")},
		Logger:  slog.New(slog.NewTextHandler(&agLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
		// The test's agent stops its tasks with it.
		StopTasksOnExit: true,
	})
	// The agent writes its secret just after the server registered the
	// node, which is what startAgentWith waits for.
	var nodeSecret []byte
	waitFor(t, 5*time.Second, "the agent's node secret file", func() bool {
		b, err := os.ReadFile(filepath.Join(dataDir, "node-secret"))
		nodeSecret = b
		return err == nil && len(bytes.TrimSpace(b)) >= 16
	})

	env := map[string]string{
		"DB_PASSWORD": secret,
		"PATH":        "/opt/" + secret + "/bin:/usr/bin:/bin",
	}
	// Not found in the task's PATH: the exec driver's error names the PATH.
	inPath := &spec.Task{Name: "inpath", Driver: "raw_exec", Env: env,
		Config:    spec.TaskConfig{Command: "drover-no-such-command"},
		Resources: spec.Resources{CPU: 10, MemoryMB: 10}}
	// A path that does not exist, with the secret in the arguments too.
	absent := &spec.Task{Name: "absent", Driver: "raw_exec", Env: env,
		Config:    spec.TaskConfig{Command: "/nonexistent/drover-test", Args: []string{"--password", secret}},
		Resources: spec.Resources{CPU: 10, MemoryMB: 10}}
	// Each in a group of its own: both fail at once (no restart can help),
	// and neither stops the other before it tried.
	j := job("leaky", spec.JobService, inPath)
	j.Groups = append(j.Groups, &spec.Group{Name: "h", Count: 1, Tasks: []*spec.Task{absent}})
	for _, g := range j.Groups {
		g.Restart = restart(2, time.Minute, 50*time.Millisecond, spec.RestartFail)
	}
	start := time.Now()
	c.submit(j)

	gaveUp := func(a *spec.Alloc) bool {
		failed := false
		for _, ts := range a.Status.Tasks {
			if ts.State != spec.TaskDead {
				return false
			}
			failed = failed || ts.Failed
		}
		return failed
	}
	var al *spec.Alloc
	waitFor(t, 30*time.Second, "the tasks to fail to start and give up", func() bool {
		as, _, err := c.client.Allocs(context.Background(), "leaky", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, a := range as {
			if a.Status != nil && a.Status.Tasks["inpath"] != nil {
				al = a
			}
			if a.Status != nil && gaveUp(a) {
				done++
			}
		}
		if done == 2 && al != nil {
			return true
		}
		if time.Since(start) > 25*time.Second {
			t.Fatalf("still waiting; alloc:\n%s", describe(al))
		}
		return false
	})
	// The redaction did its work (the test is not vacuous): the start
	// failure of inpath named its PATH, by name only.
	ts := taskState(al, "inpath")
	if fails := events(ts, spec.EventDriverFail); len(fails) == 0 || !strings.Contains(fails[0].Message, "<env PATH>") {
		t.Errorf("inpath's driver failure should name the PATH as <env PATH>; events:\n%s", describe(al))
	}

	// Everything the API says about the alloc and the node, and error
	// bodies of requests that fail around them.
	captured := map[string]string{}
	fetch := func(method, path string, header http.Header, body string) {
		req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		captured[method+" "+path+" ("+resp.Status+")"] = withoutTaskSpecs(t, b)
	}
	node := ag.NodeID()
	fetch("GET", "/v1/allocations/"+al.ID, nil, "")
	fetch("GET", "/v1/jobs/leaky/allocations", nil, "")
	fetch("GET", "/v1/allocations?job=leaky", nil, "")
	fetch("GET", "/v1/nodes/"+node, nil, "")
	fetch("GET", "/v1/nodes/"+node+"/allocations", http.Header{client.NodeSecretHeader: {string(bytes.TrimSpace(nodeSecret))}}, "")
	fetch("GET", "/v1/nodes", nil, "")
	fetch("GET", "/v1/jobs/leaky/deployments", nil, "")
	fetch("GET", "/v1/allocations/"+al.ID+"/logs?task=inpath", nil, "")
	fetch("GET", "/v1/allocations/"+al.ID+"/logs?task=nope", nil, "")
	fetch("GET", "/v1/client/usage", nil, "")
	// A wrong node secret is refused without being echoed.
	fetch("PUT", "/v1/nodes/"+node+"/heartbeat", http.Header{client.NodeSecretHeader: {secret}}, "{}")
	fetch("GET", "/v1/nodes/"+node+"/allocations", http.Header{client.NodeSecretHeader: {secret}}, "")
	// Jobs the server refuses: a bad env name, a wrong type next to the
	// env, a body that is not JSON after the env.
	fetch("POST", "/v1/jobs", nil, `{"name":"bad","groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"raw_exec","config":{"command":"true"},"env":{"BAD=NAME":"`+secret+`"}}]}]}`)
	fetch("POST", "/v1/jobs", nil, `{"name":"bad","groups":[{"name":"g","count":1,"tasks":[{"name":"t","env":{"A":"`+secret+`"},"resources":"`+secret+`"}]}]}`)
	fetch("POST", "/v1/jobs", nil, `{"name":"bad","groups":[{"tasks":[{"env":{"A":"`+secret+`"}}]}]} `+secret)
	fetch("POST", "/v1/validate/job", nil, `{"name":"bad","groups":[{"name":"g","count":-1,"tasks":[{"name":"t","driver":"nope","env":{"A":"`+secret+`"}}]}]}`)

	// The stored job itself carries its env (as Nomad's does), and so does
	// the copy of its tasks in each allocation (which the node needs to
	// run them): reading those is for authorization to decide (issue 8),
	// and docs/security.md says so. withoutTaskSpecs left them out of
	// what is searched.
	resp, err := http.Get(c.url + "/v1/jobs/leaky")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), secret) {
		t.Errorf("GET /v1/jobs/leaky should return the job's env as submitted")
	}

	ag.stop(t) // its last log lines
	captured["server log"] = srvLog.String()
	captured["agent log"] = agLog.String()
	if !strings.Contains(captured["agent log"], "level=DEBUG") && !strings.Contains(captured["agent log"], "task event") {
		t.Errorf("the agent logged nothing to search:\n%s", captured["agent log"])
	}
	if !strings.Contains(captured["server log"], "level=DEBUG") {
		t.Errorf("the server logged nothing at debug level to search")
	}
	for what, text := range captured {
		for name, s := range map[string]string{"env value": secret, "node secret": string(bytes.TrimSpace(nodeSecret))} {
			if n := strings.Count(text, s); n > 0 {
				t.Errorf("%s: the %s appears %d times:\n%s", what, name, n, linesWith(text, s))
			}
		}
	}
}

// withoutTaskSpecs returns an API answer without the task specs that
// allocations carry ("tasks": the job's own, env included), keeping their
// observed status, events included.
func withoutTaskSpecs(t *testing.T, b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b) // an error body that is not JSON: search it all
	}
	strip := func(x any) {
		if m, ok := x.(map[string]any); ok && m["node_id"] != nil { // an alloc
			delete(m, "tasks")
		}
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			strip(e)
		}
	default:
		strip(x)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func linesWith(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}

// An agent whose first registration's answer is lost after the server
// stored its node's secret sends the registration again and is admitted:
// it made the secret and kept it before sending it, where a secret the
// server made was lost with the answer and every later registration was
// refused (403) until an operator removed the node. The node still
// refuses anyone without its secret.
func TestFirstRegistrationAnswerLostIsSentAgain(t *testing.T) {
	c := newCluster(t)
	var mu sync.Mutex
	var registrations int
	lose := func(r *http.Request) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/nodes" {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		registrations++
		return registrations == 1
	}
	c.loseAnswer.Store(&lose)
	dataDir := t.TempDir()
	ag := c.startAgent(dataDir, true)
	waitFor(t, 10*time.Second, "the registration to be sent again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return registrations >= 2
	})
	// Admitted: the agent runs on (a refused registration ends Run) and
	// its heartbeats are answered.
	waitFor(t, 10*time.Second, "a heartbeat answered after the registration sent again", func() bool {
		select {
		case err := <-ag.done:
			ag.done <- err
			t.Fatalf("the agent stopped: %v", err)
		default:
		}
		return agent.SinceContact(ag.Agent) < time.Second
	})
	b, err := os.ReadFile(filepath.Join(dataDir, "node-secret"))
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(b))
	node := &spec.Node{ID: ag.NodeID(), Name: "node-1", Resources: spec.Resources{CPU: 1000, MemoryMB: 1000}}
	for _, try := range []struct{ what, secret string }{{"no secret", ""}, {"a made-up secret", strings.Repeat("0", 64)}} {
		other, err := client.New(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if try.secret != "" {
			other.SetNodeSecret(try.secret)
		}
		if _, err := other.RegisterNode(context.Background(), node); !client.IsStatus(err, http.StatusForbidden) {
			t.Errorf("registering the node with %s: %v, want a 403", try.what, err)
		}
	}
	own, err := client.New(c.url)
	if err != nil {
		t.Fatal(err)
	}
	own.SetNodeSecret(secret)
	if _, err := own.Heartbeat(context.Background(), ag.NodeID()); err != nil {
		t.Fatalf("a heartbeat with the secret the agent kept: %v", err)
	}
}
