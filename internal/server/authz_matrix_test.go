package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/ui"
)

// The endpoint x identity matrix. A real server (embedded etcd, ACLs on,
// mutual TLS with certificates from internal/pki) is asked every endpoint
// by six identities, and each answer is checked against what the
// endpoint's kind allows. A route of the server that this test does not
// list fails it: a new endpoint cannot ship without saying who may call it.

// rule is who may call an endpoint.
type rule int

const (
	ruleOpen       rule = iota // anyone with a certificate of the cluster
	ruleNode                   // only the node itself (agent certificate + node secret)
	ruleRead                   // read in the target's namespace ("default")
	ruleList                   // any valid token; the answer is filtered
	ruleAnyToken               // any valid token
	ruleSubmit                 // submit in the target's namespace
	ruleLogs                   // logs in the target's namespace
	ruleExec                   // exec in the target's namespace
	ruleNodeRead               // node read
	ruleNodeWrite              // node write
	ruleManagement             // a management token
	ruleCatalog                // any token, or an agent's certificate (templates read the catalog)
)

// identities are the identities, in the order they are tried (management last:
// its writes change what the others would see).
var identities = []string{"no token", "bad token", "node identity", "read-only", "other namespace", "management"}

// allowed says whether identity id passes rule r.
func allowed(r rule, id string) bool {
	switch r {
	case ruleOpen:
		return true
	case ruleNode:
		return id == "node identity"
	case ruleRead:
		return id == "read-only" || id == "management"
	case ruleList, ruleAnyToken:
		return id == "read-only" || id == "other namespace" || id == "management"
	case ruleNodeRead:
		return id == "read-only" || id == "management"
	case ruleCatalog:
		return id == "node identity" || id == "read-only" || id == "other namespace" || id == "management"
	}
	return id == "management" // submit, logs, node write, management
}

// refusal is the status an identity that may not call the endpoint gets.
func refusal(id string) int {
	if id == "no token" {
		return http.StatusUnauthorized
	}
	return http.StatusForbidden
}

type matrixCase struct {
	rule         rule
	method, path string
	body         string
	// anyAnswer: the answer of an allowed identity depends on state the
	// earlier requests changed (a deployment already failed, a node with no
	// agent to fetch logs from): it must pass authorization (no 401/403)
	// and not be a 500, but need not be 2xx.
	anyAnswer bool
}

func TestEndpointIdentityMatrix(t *testing.T) {
	f := newAuthFixture(t)
	job := func(name, ns, meta string) string {
		return `{"name":"` + name + `","namespace":"` + ns + `","meta":{"m":"` + meta + `"},"update":{"max_parallel":1},"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/sleep","args":["60"]},"resources":{"cpu":10,"memory":10}}]}]}`
	}
	cases := map[string]matrixCase{
		"POST /v1/jobs":                       {ruleSubmit, "POST", "/v1/jobs", job("web", "default", "2"), false},
		"GET /v1/jobs":                        {ruleList, "GET", "/v1/jobs", "", false},
		"GET /v1/jobs/{name}":                 {ruleRead, "GET", "/v1/jobs/web", "", false},
		"DELETE /v1/jobs/{name}":              {ruleSubmit, "DELETE", "/v1/jobs/stopme", "", false},
		"GET /v1/jobs/{name}/allocations":     {ruleRead, "GET", "/v1/jobs/web/allocations", "", false},
		"GET /v1/jobs/{name}/versions":        {ruleRead, "GET", "/v1/jobs/web/versions", "", false},
		"GET /v1/jobs/{name}/diff":            {ruleRead, "GET", "/v1/jobs/web/diff?from=1&to=2", "", false},
		"POST /v1/jobs/{name}/revert":         {ruleSubmit, "POST", "/v1/jobs/web/revert", `{"version":1}`, false},
		"POST /v1/jobs/{name}/scale":          {ruleSubmit, "POST", "/v1/jobs/web/scale", `{"count":1}`, false},
		"POST /v1/jobs/{name}/restart":        {ruleSubmit, "POST", "/v1/jobs/web/restart", "", false},
		"GET /v1/jobs/{name}/deployments":     {ruleRead, "GET", "/v1/jobs/web/deployments", "", false},
		"GET /v1/jobs/{name}/deployment":      {ruleRead, "GET", "/v1/jobs/web/deployment", "", false},
		"GET /v1/deployments":                 {ruleList, "GET", "/v1/deployments", "", false},
		"GET /v1/deployments/{id}":            {ruleRead, "GET", "/v1/deployments/" + f.deployment, "", false},
		"POST /v1/deployments/{id}/promote":   {ruleSubmit, "POST", "/v1/deployments/" + f.deployment + "/promote", "", true},
		"POST /v1/deployments/{id}/fail":      {ruleSubmit, "POST", "/v1/deployments/" + f.deployment + "/fail", "", true},
		"POST /v1/deployments/{id}/pause":     {ruleSubmit, "POST", "/v1/deployments/" + f.deployment + "/pause", "", true},
		"POST /v1/deployments/{id}/resume":    {ruleSubmit, "POST", "/v1/deployments/" + f.deployment + "/resume", "", true},
		"POST /v1/jobs/plan":                  {ruleSubmit, "POST", "/v1/jobs/plan", job("web", "default", "3"), false},
		"GET /v1/plan/without":                {ruleNodeRead, "GET", "/v1/plan/without?node=n1", "", false},
		"POST /v1/validate/job":               {ruleAnyToken, "POST", "/v1/validate/job", job("x", "default", "1"), false},
		"POST /v1/jobs/parse":                 {ruleAnyToken, "POST", "/v1/jobs/parse", `{"source":"job \"x\" {\n group \"g\" {\n task \"t\" {\n driver = \"raw_exec\"\n config { command = \"/bin/true\" }\n }\n }\n}\n"}`, false},
		"GET /v1/allocations":                 {ruleList, "GET", "/v1/allocations", "", false},
		"GET /v1/allocations/{id}":            {ruleRead, "GET", "/v1/allocations/" + f.alloc, "", false},
		"PUT /v1/allocations/{id}/status":     {ruleNode, "PUT", "/v1/allocations/" + f.alloc + "/status", `{"node_id":"n1","status":{"client_status":"running"}}`, false},
		"GET /v1/allocations/{id}/logs":       {ruleLogs, "GET", "/v1/allocations/" + f.alloc + "/logs", "", true},
		"POST /v1/jobs/{name}/periodic/force": {ruleSubmit, "POST", "/v1/jobs/web/periodic/force", "", true},
		"POST /v1/jobs/{name}/dispatch":       {ruleSubmit, "POST", "/v1/jobs/web/dispatch", `{}`, true},
		// Without an Upgrade the exec endpoint answers 400 once the
		// capability is checked.
		"GET /v1/allocations/{id}/exec": {ruleExec, "GET", "/v1/allocations/" + f.alloc + "/exec?cmd=true", "", true},
		// The fixture's node has no agent: past authorization, a 502.
		"POST /v1/allocations/{id}/signal":  {ruleSubmit, "POST", "/v1/allocations/" + f.alloc + "/signal?signal=SIGHUP", "", true},
		"POST /v1/allocations/{id}/restart": {ruleSubmit, "POST", "/v1/allocations/" + f.alloc + "/restart", "", true},
		// A second stop of the same alloc changes nothing: still a 200.
		"POST /v1/allocations/{id}/stop":        {ruleSubmit, "POST", "/v1/allocations/" + f.alloc + "/stop", "", true},
		"GET /v1/nodes":                         {ruleNodeRead, "GET", "/v1/nodes", "", false},
		"POST /v1/nodes":                        {ruleNode, "POST", "/v1/nodes", testNode, false},
		"GET /v1/nodes/{id}":                    {ruleNodeRead, "GET", "/v1/nodes/n1", "", false},
		"GET /v1/nodes/{id}/allocations":        {ruleNode, "GET", "/v1/nodes/n1/allocations", "", false},
		"GET /v1/nodes/{id}/usage":              {ruleNodeRead, "GET", "/v1/nodes/n1/usage", "", true},
		"PUT /v1/nodes/{id}/allocations/status": {ruleNode, "PUT", "/v1/nodes/n1/allocations/status", `{"allocs":[]}`, false},
		"PUT /v1/nodes/{id}/heartbeat":          {ruleNode, "PUT", "/v1/nodes/n1/heartbeat", "", false},
		"PUT /v1/nodes/{id}/eligibility":        {ruleNodeWrite, "PUT", "/v1/nodes/n1/eligibility", `{"eligible":true}`, false},
		"PUT /v1/nodes/{id}/drain":              {ruleNodeWrite, "PUT", "/v1/nodes/n1/drain", `{"enable":false}`, false},
		"PUT /v1/nodes/{id}/usage":              {ruleNode, "PUT", "/v1/nodes/n1/usage", `{"cpu":1,"memory_mb":1}`, true},
		"GET /v1/status/leader":                 {ruleOpen, "GET", "/v1/status/leader", "", false},
		"GET /v1/services":                      {ruleCatalog, "GET", "/v1/services", "", false},
		"GET /v1/services/{name}":               {ruleCatalog, "GET", "/v1/services/nothing", "", true},
		"GET /v1/events":                        {ruleList, "GET", "/v1/events", "", false},
		// The fixture's server keeps no log stream: a 404 past authorization.
		"GET /v1/agent/monitor":   {ruleManagement, "GET", "/v1/agent/monitor", "", true},
		"POST /v1/ui/login-codes": {ruleAnyToken, "POST", "/v1/ui/login-codes", "", false},
		// A code that was never issued: a 400 that says to get a new link.
		"POST /v1/ui/session":   {ruleOpen, "POST", "/v1/ui/session", `{"code":"nope"}`, true},
		"DELETE /v1/ui/session": {ruleOpen, "DELETE", "/v1/ui/session", "", false},
		"GET /v1/ui/whoami":     {ruleAnyToken, "GET", "/v1/ui/whoami", "", false},
		// Bootstrap is open and works once: the fixture did it, so every
		// identity gets a 409 (which is not a 401/403).
		"POST /v1/acl/bootstrap":           {ruleOpen, "POST", "/v1/acl/bootstrap", "", true},
		"GET /v1/acl/token/self":           {ruleAnyToken, "GET", "/v1/acl/token/self", "", false},
		"GET /v1/acl/tokens":               {ruleManagement, "GET", "/v1/acl/tokens", "", false},
		"POST /v1/acl/tokens":              {ruleManagement, "POST", "/v1/acl/tokens", `{"name":"new","policies":["reader"]}`, false},
		"GET /v1/acl/tokens/{accessor}":    {ruleManagement, "GET", "/v1/acl/tokens/" + f.readerAccessor, "", false},
		"DELETE /v1/acl/tokens/{accessor}": {ruleManagement, "DELETE", "/v1/acl/tokens/" + f.spareAccessor, "", false},
		"GET /v1/acl/policies":             {ruleManagement, "GET", "/v1/acl/policies", "", false},
		"GET /v1/acl/policies/{name}":      {ruleManagement, "GET", "/v1/acl/policies/reader", "", false},
		"PUT /v1/acl/policies/{name}":      {ruleManagement, "PUT", "/v1/acl/policies/tmp", `{"rules":"namespace \"tmp\" { capabilities = [\"read\"] }"}`, false},
		"DELETE /v1/acl/policies/{name}":   {ruleManagement, "DELETE", "/v1/acl/policies/spare", "", false},
	}
	for _, rt := range f.srv.routeTable() {
		if _, ok := cases[rt.pattern]; !ok {
			t.Errorf("route %s (access %s) is not in the matrix: add it to TestEndpointIdentityMatrix with who may call it", rt.pattern, rt.access)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	cells := 0
	for _, rt := range f.srv.routeTable() {
		c := cases[rt.pattern]
		for _, id := range identities {
			status, body := f.call(id, c.method, c.path, c.body)
			cells++
			switch {
			case !allowed(c.rule, id):
				if want := refusal(id); status != want && !(c.rule == ruleNode && status == http.StatusForbidden) {
					t.Errorf("%s as %s: %d, want %d: %s", rt.pattern, id, status, want, body)
				}
			case c.anyAnswer:
				if status == 401 || status == 403 || status == 500 {
					t.Errorf("%s as %s: %d, want it past authorization: %s", rt.pattern, id, status, body)
				}
			default:
				if status/100 != 2 {
					t.Errorf("%s as %s: %d, want 2xx: %s", rt.pattern, id, status, body)
				}
			}
		}
	}
	t.Logf("%d endpoints x %d identities = %d answers checked", len(f.srv.routeTable()), len(identities), cells)

	// Every request and refusal was logged at debug level: no token's
	// secret and no node secret is in the log.
	logs := f.logs.String()
	for id, secret := range f.tokens {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s token's secret is in the server's log", id)
		}
	}
	if strings.Contains(logs, f.nodeSecret) {
		t.Error("the node secret is in the server's log")
	}
	if !strings.Contains(logs, "/v1/acl/tokens") {
		t.Errorf("the debug log does not show the requests; the check above proves nothing:\n%.2000s", logs)
	}
}

// lockedBuffer is a log sink for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestListsShowOnlyReadableNamespaces: a token for namespace "other" sees
// its own job and none of "default"'s in every list.
func TestListsShowOnlyReadableNamespaces(t *testing.T) {
	f := newAuthFixture(t)
	st, body := f.call("other namespace", "POST", "/v1/jobs", `{"name":"mine","namespace":"other","groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"},"resources":{"cpu":10,"memory":10}}]}]}`)
	if st != 200 {
		t.Fatalf("submit in own namespace: %d %s", st, body)
	}
	f.waitAllocs(t, "mine")
	for _, path := range []string{"/v1/jobs", "/v1/allocations", "/v1/deployments", "/v1/events?topic=job,alloc,deployment"} {
		st, body := f.call("other namespace", "GET", path, "")
		if st != 200 {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		if strings.Contains(body, `"web"`) || strings.Contains(body, `"namespace":"default"`) {
			t.Errorf("GET %s as a token of namespace other shows namespace default's: %s", path, body)
		}
		if path != "/v1/deployments" && !strings.Contains(body, `"mine"`) {
			t.Errorf("GET %s as a token of namespace other does not show its own job: %s", path, body)
		}
		_, all := f.call("management", "GET", path, "")
		if !strings.Contains(all, `"web"`) {
			t.Errorf("GET %s as management does not show web: %s", path, all)
		}
	}
	// The same name in another namespace is refused, without saying where
	// to a token that cannot read there.
	st, body = f.call("other namespace", "POST", "/v1/jobs", `{"name":"web","namespace":"other","groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"}}]}]}`)
	if st != http.StatusConflict || !strings.Contains(body, "another namespace") {
		t.Errorf("job name taken in another namespace: %d %s", st, body)
	}
	st, body = f.call("management", "POST", "/v1/jobs", `{"name":"web","namespace":"other","groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"}}]}]}`)
	if st != http.StatusConflict || !strings.Contains(body, `already exists in namespace \"default\"`) {
		t.Errorf("job name taken in another namespace, to a token that may read it: %d %s", st, body)
	}
}

// TestPlainHTTPNodeSecretIsNoToken: without TLS, the node secret still
// opens no operator endpoint.
func TestPlainHTTPNodeSecretIsNoToken(t *testing.T) {
	f := newAuthFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpapi.Serve(ln, f.srv.Handler(nil), httpapi.Limits{}, nil)
	t.Cleanup(func() { hs.Close() })
	for _, path := range []string{"/v1/jobs", "/v1/nodes", "/v1/acl/tokens"} {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
		req.Header.Set("X-Drover-Node-Secret", f.nodeSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with only a node secret: %d, want 401", path, resp.StatusCode)
		}
	}
}

const testNode = `{"id":"n1","name":"n1","resources":{"cpu":4000,"memory":4000},"drivers":["exec"]}`

type authFixture struct {
	srv                           *Server
	base                          string
	cli, agent, browser           *http.Client      // browser: no client certificate
	tokens                        map[string]string // identity -> secret
	nodeSecret                    string
	alloc, deployment             string
	readerAccessor, spareAccessor string
	logs                          *lockedBuffer
}

func newAuthFixture(t testing.TB) *authFixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	if _, err := pki.Init(tlsDir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: filepath.Join(dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	serverFiles := pki.DirFiles(tlsDir, pki.RoleServer)
	agentTLS, err := pki.ClientConfig(serverFiles, pki.AgentName)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Registry: reg, ID: "test", Logger: log, ACL: true, AgentTLS: agentTLS, NodeTTL: time.Hour})
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	serveTLS, err := pki.ServerConfig(serverFiles)
	if err != nil {
		t.Fatal(err)
	}
	serveTLS.ClientAuth = tls.VerifyClientCertIfGiven // as drover server and dev serve: browsers have no certificate
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpapi.Serve(ln, srv.Handler(nil), httpapi.Limits{TLS: serveTLS}, log)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		reg.Close()
		emb.Close()
	})
	f := &authFixture{srv: srv, base: "https://" + ln.Addr().String(), tokens: map[string]string{}, logs: logs}
	f.cli = httpsClient(t, pki.DirFiles(tlsDir, pki.RoleCLI))
	f.browser = httpsClient(t, pki.Files{CA: filepath.Join(tlsDir, pki.CAFile)})
	f.agent = httpsClient(t, pki.DirFiles(tlsDir, pki.RoleAgent))
	for deadline := time.Now().Add(10 * time.Second); !srv.loop.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not become leader within 10s")
		}
	}

	// The bootstrap token is the management identity.
	st, body := f.call("", "POST", "/v1/acl/bootstrap", "")
	if st != 200 {
		t.Fatalf("bootstrap: %d %s", st, body)
	}
	f.tokens["management"] = field(t, body, "secret_id")
	f.tokens["bad token"] = strings.Repeat("ab", 32)
	f.mustOK(t, "PUT", "/v1/acl/policies/reader", `{"rules":"namespace \"*\" { capabilities = [\"read\"] }\nnode { capabilities = [\"read\"] }"}`)
	f.mustOK(t, "PUT", "/v1/acl/policies/other", `{"rules":"namespace \"other\" { capabilities = [\"read\", \"submit\", \"logs\"] }"}`)
	f.mustOK(t, "PUT", "/v1/acl/policies/spare", `{"rules":"namespace \"spare\" { capabilities = [\"read\"] }"}`)
	body = f.mustOK(t, "POST", "/v1/acl/tokens", `{"name":"reader","policies":["reader"]}`)
	f.tokens["read-only"], f.readerAccessor = field(t, body, "secret_id"), field(t, body, "accessor_id")
	body = f.mustOK(t, "POST", "/v1/acl/tokens", `{"name":"other","policies":["other"]}`)
	f.tokens["other namespace"] = field(t, body, "secret_id")
	body = f.mustOK(t, "POST", "/v1/acl/tokens", `{"name":"spare","policies":["spare"]}`)
	f.spareAccessor = field(t, body, "accessor_id")

	// The node registers with its agent certificate and gets its secret.
	st, body = f.call("node identity", "POST", "/v1/nodes", testNode)
	if st != 200 {
		t.Fatalf("register node: %d %s", st, body)
	}
	f.nodeSecret = field(t, body, "secret")

	spec := func(name, meta string) string {
		return `{"name":"` + name + `","meta":{"m":"` + meta + `"},"update":{"max_parallel":1},"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/sleep","args":["60"]},"resources":{"cpu":10,"memory":10}}]}]}`
	}
	f.mustOK(t, "POST", "/v1/jobs", spec("web", "1"))
	f.mustOK(t, "POST", "/v1/jobs", spec("web", "2")) // two versions, so that a revert has one to go to
	f.mustOK(t, "POST", "/v1/jobs", spec("stopme", "1"))
	f.alloc = f.waitAllocs(t, "web")
	for deadline := time.Now().Add(10 * time.Second); f.deployment == ""; time.Sleep(20 * time.Millisecond) {
		if st, body := f.call("management", "GET", "/v1/jobs/web/deployment", ""); st == 200 {
			f.deployment = field(t, body, "id")
		} else if time.Now().After(deadline) {
			t.Fatalf("no deployment of web within 10s: %d %s", st, body)
		}
	}
	return f
}

// waitAllocs waits for job's first allocation and returns its ID.
func (f *authFixture) waitAllocs(t testing.TB, job string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body := f.call("management", "GET", "/v1/jobs/"+job+"/allocations", "")
		var allocs []spec.Alloc
		json.Unmarshal([]byte(body), &allocs)
		if len(allocs) > 0 {
			return allocs[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s was not placed within 10s: %s", job, body)
		}
	}
}

func httpsClient(t testing.TB, files pki.Files) *http.Client {
	t.Helper()
	cfg, err := pki.ClientConfig(files, pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}

// call makes a request as identity id ("" is a CLI certificate with no
// token, as "no token").
func (f *authFixture) call(id, method, path, body string) (int, string) {
	req, _ := http.NewRequest(method, f.base+path, strings.NewReader(body))
	hc := f.cli
	if id == "node identity" {
		hc = f.agent
		if f.nodeSecret != "" {
			req.Header.Set("X-Drover-Node-Secret", f.nodeSecret)
		}
	} else if tok := f.tokens[id]; tok != "" {
		req.Header.Set(TokenHeader, tok)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

func (f *authFixture) mustOK(t testing.TB, method, path, body string) string {
	t.Helper()
	st, out := f.call("management", method, path, body)
	if st/100 != 2 {
		t.Fatalf("%s %s as management: %d %s", method, path, st, out)
	}
	return out
}

func field(t testing.TB, body, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	s, _ := m[name].(string)
	if s == "" {
		t.Fatalf("no %s in %s", name, body)
	}
	return s
}

// TestTokenDeletedDuringABlockingQuery: a long poll whose token is deleted
// ends with a 403 within seconds, not at the end of its wait (reliability
// case 40).
func TestTokenDeletedDuringABlockingQuery(t *testing.T) {
	f := newAuthFixture(t)
	body := f.mustOK(t, "POST", "/v1/acl/tokens", `{"name":"short-lived","policies":["reader"]}`)
	f.tokens["short-lived"] = field(t, body, "secret_id")
	accessor := field(t, body, "accessor_id")
	st, _ := f.call("short-lived", "GET", "/v1/jobs", "")
	if st != 200 {
		t.Fatalf("the new token does not work: %d", st)
	}
	type answer struct {
		status int
		body   string
		at     time.Time
	}
	got := make(chan answer, 1)
	go func() {
		// An index far ahead: the query waits its whole minute unless cut.
		st, body := f.call("short-lived", "GET", "/v1/jobs?index=999999999&wait=60s", "")
		got <- answer{st, body, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond)
	deleted := time.Now()
	f.mustOK(t, "DELETE", "/v1/acl/tokens/"+accessor, "")
	select {
	case a := <-got:
		if a.status != http.StatusForbidden || !strings.Contains(a.body, "deleted") {
			t.Fatalf("blocking query after its token was deleted: %d %s, want 403", a.status, a.body)
		}
		t.Logf("token deleted -> blocking query ended with 403 after %s", a.at.Sub(deleted).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking query still waits 10s after its token was deleted")
	}
	if st, _ := f.call("short-lived", "GET", "/v1/jobs", ""); st != http.StatusForbidden {
		t.Errorf("a new request with the deleted token: %d, want 403", st)
	}
}

// BenchmarkAPIRequestCost is what mutual TLS and an ACL check add to an API
// request on a kept-alive connection: the same GET /v1/jobs/web against
// the same server over plain HTTP without a token (the baseline) and over
// mutual TLS with a read-only token.
func BenchmarkAPIRequestCost(b *testing.B) {
	f := newAuthFixture(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	// A second server on the same registry, which reads its own state.
	open := New(Config{Registry: f.srv.reg, ID: "open", Logger: slog.New(slog.DiscardHandler), APIOnly: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { open.Run(ctx); close(done) }()
	hs := httpapi.Serve(ln, open.Handler(nil), httpapi.Limits{}, nil)
	b.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); !open.ready.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the second server did not read the registry within 10s")
		}
	}
	plain := &http.Client{Transport: &http.Transport{}}
	get := func(b *testing.B, hc *http.Client, url, token string) {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
	}
	b.Run("plain-no-acl", func(b *testing.B) {
		for b.Loop() {
			get(b, plain, "http://"+ln.Addr().String()+"/v1/jobs/web", "")
		}
	})
	b.Run("mtls-acl", func(b *testing.B) {
		for b.Loop() {
			get(b, f.cli, f.base+"/v1/jobs/web", f.tokens["read-only"])
		}
	})
}

// TestBrowserWithoutCertificate: a server accepts a TLS client with no
// certificate (a browser, for the UI), which then gets the UI, and the API
// with a token; but no agent's endpoint, no ACL bootstrap and no metrics.
func TestBrowserWithoutCertificate(t *testing.T) {
	f := newAuthFixture(t)
	get := func(method, path, token string) (int, string) {
		req, _ := http.NewRequest(method, f.base+path, nil)
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		resp, err := f.browser.Do(req)
		if err != nil {
			t.Fatalf("%s %s without a certificate: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		method, path, token string
		want                int
		contains            string
	}{
		{"GET", "/ui/", "", 200, "<title>drover</title>"},
		{"GET", "/ui/app.js", "", 200, "followEvents"},
		{"GET", "/ui/html.js", "", 200, "export function html"},
		{"GET", "/", "", 200, "<title>drover</title>"}, // redirected to /ui/
		{"GET", "/livez", "", 200, "ok"},
		{"GET", "/v1/jobs", "", 401, "needs an ACL token"},
		{"GET", "/v1/jobs", f.tokens["read-only"], 200, `"web"`},
		{"GET", "/v1/nodes/n1/allocations", "", 403, "agent certificate"},
		{"POST", "/v1/nodes", f.tokens["management"], 403, "agent certificate"},
		{"POST", "/v1/acl/bootstrap", "", 403, "certificate of the cluster"},
		{"GET", "/metrics", f.tokens["management"], 403, "certificate of the cluster"},
	}
	for _, c := range cases {
		st, body := get(c.method, c.path, c.token)
		if st != c.want || !strings.Contains(body, c.contains) {
			t.Errorf("%s %s (token %v) without a certificate: %d %.200s; want %d with %q", c.method, c.path, c.token != "", st, body, c.want, c.contains)
		}
	}
	csp := ""
	if resp, err := f.browser.Get(f.base + "/ui/"); err == nil {
		csp = resp.Header.Get("Content-Security-Policy")
		resp.Body.Close()
	}
	if csp != ui.ContentSecurityPolicy || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("the UI's Content-Security-Policy is %q", csp)
	}
}
