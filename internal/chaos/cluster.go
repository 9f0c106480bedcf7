package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/client"
)

// Etcd kinds the suite runs drover on.
const (
	// EtcdEmbedded: the first server carries drover's embedded etcd and
	// serves the API only; the other two campaign and reach its etcd
	// through the suite's proxies.
	EtcdEmbedded = "embedded"
	// EtcdExternal: a three-member cluster of the system's etcd
	// (Debian's etcd-server, 3.4); all three servers campaign, each
	// reaching every member through proxies of its own.
	EtcdExternal = "external"
)

// leaderTTL is the servers' --leader-ttl (drover's default).
const leaderTTL = 2 * time.Second

var (
	serverReady = regexp.MustCompile(`drover server \S+: API at (https://[^,\s]+)`)
	agentReady  = regexp.MustCompile(`^drover agent (\S+)`)
)

// cluster is the processes of one run.
type cluster struct {
	cfg    Config
	dir    string
	tlsDir string

	members []*proc  // external etcd members
	etcd    []string // etcd client URLs as the suite reaches them (direct)

	servers []*proc
	// proxies[i] are server i's connections to etcd (none for the
	// embedded etcd's own server).
	proxies [][]*proxy
	// leads says which servers campaign.
	leads  []bool
	agents []*proc
	api    *client.Client
	token  string
}

func (c *cluster) newProc(name string, ready *regexp.Regexp, args func() []string) (*proc, error) {
	f, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	return &proc{name: name, args: args, ready: ready, logf: f}, nil
}

// freePorts returns n distinct free loopback ports (held open together so
// that none is handed out twice).
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startCluster starts etcd, three servers and cfg.Agents agents, TLS and
// ACLs on as by default, and returns once every node is ready.
func startCluster(ctx context.Context, cfg Config, dir string) (c *cluster, err error) {
	c = &cluster{cfg: cfg, dir: dir, tlsDir: filepath.Join(dir, "tls")}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	switch cfg.Etcd {
	case EtcdExternal:
		err = c.startExternal()
	case EtcdEmbedded:
		err = c.startEmbedded()
	default:
		err = fmt.Errorf("chaos: etcd kind %q: want %s or %s", cfg.Etcd, EtcdEmbedded, EtcdExternal)
	}
	if err != nil {
		return c, err
	}
	var addrs []string
	for _, s := range c.servers {
		addrs = append(addrs, s.match[1])
	}
	for i := range cfg.Agents {
		name := fmt.Sprintf("a%d", i+1)
		// Each agent's list starts at a different server.
		list := append(append([]string(nil), addrs[i%len(addrs):]...), addrs[:i%len(addrs)]...)
		p, err := c.newProc(name, agentReady, func() []string {
			return []string{cfg.Drover, "agent", "--name", name, "--data-dir", filepath.Join(dir, name), "--tls-dir", c.tlsDir,
				"--http-addr", "127.0.0.1:0", "--servers", strings.Join(list, ","), "--drivers", "raw_exec", "--log-level", "info",
				"--min-dynamic-port", "23000", "--max-dynamic-port", "23999"}
		})
		if err != nil {
			return c, err
		}
		c.agents = append(c.agents, p)
		if err := p.start(); err != nil {
			return c, err
		}
	}
	opts := client.Config{Addresses: addrs, TLSDir: c.tlsDir}
	boot, err := opts.Client()
	if err != nil {
		return c, err
	}
	tok, err := boot.ACLBootstrap(ctx)
	if err != nil {
		return c, fmt.Errorf("chaos: acl bootstrap: %w", err)
	}
	opts.Token, c.token = tok.SecretID, tok.SecretID
	if c.api, err = opts.Client(); err != nil {
		return c, err
	}
	return c, c.waitNodes(ctx, time.Minute)
}

// waitNodes waits until every agent's node is ready.
func (c *cluster) waitNodes(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		nodes, _, err := c.api.Nodes(ctx, nil)
		ready := 0
		for _, n := range nodes {
			if n.Status == "ready" {
				ready++
			}
		}
		if err == nil && ready == len(c.agents) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: %d of %d nodes ready after %s (last error: %v)", ready, len(c.agents), within, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *cluster) startExternal() error {
	bin := c.cfg.EtcdBin
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	var initial []string
	for i := range 3 {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i+1, ports[2*i+1]))
	}
	token := fmt.Sprintf("drover-chaos-%d-%d", os.Getpid(), time.Now().UnixNano())
	for i := range 3 {
		name := fmt.Sprintf("m%d", i+1)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		state := "new"
		p, err := c.newProc("etcd-"+name, nil, func() []string {
			args := []string{bin, "--name", name, "--data-dir", filepath.Join(c.dir, "etcd-"+name),
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", state,
				"--initial-cluster-token", token, "--logger", "zap", "--log-level", "warn"}
			state = "existing" // a restart rejoins
			return args
		})
		if err != nil {
			return err
		}
		c.members = append(c.members, p)
		c.etcd = append(c.etcd, client)
		if err := p.start(); err != nil {
			return err
		}
	}
	if err := c.waitEtcd(30 * time.Second); err != nil {
		return err
	}
	for i := range 3 {
		name := fmt.Sprintf("s%d", i+1)
		var eps []string
		var ps []*proxy
		for _, u := range c.etcd {
			px, err := newProxy(strings.TrimPrefix(u, "http://"))
			if err != nil {
				return err
			}
			ps = append(ps, px)
			eps = append(eps, "http://"+px.Addr())
		}
		c.proxies = append(c.proxies, ps)
		c.leads = append(c.leads, true)
		if err := c.startServer(name, "--etcd-endpoints", strings.Join(eps, ",")); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) startEmbedded() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	etcd := fmt.Sprintf("127.0.0.1:%d", ports[0])
	c.etcd = []string{"http://" + etcd}
	c.proxies = append(c.proxies, nil)
	c.leads = append(c.leads, false)
	if err := c.startServer("s1", "--api-only", "--data-dir", filepath.Join(c.dir, "s1"),
		"--etcd-client-addr", etcd, "--etcd-peer-addr", fmt.Sprintf("127.0.0.1:%d", ports[1])); err != nil {
		return err
	}
	for _, name := range []string{"s2", "s3"} {
		px, err := newProxy(etcd)
		if err != nil {
			return err
		}
		c.proxies = append(c.proxies, []*proxy{px})
		c.leads = append(c.leads, true)
		if err := c.startServer(name, "--etcd-endpoints", "http://"+px.Addr()); err != nil {
			return err
		}
	}
	return nil
}

// startServer starts `drover server --name name` with extra flags; a
// restart keeps its API address.
func (c *cluster) startServer(name string, extra ...string) error {
	var p *proc
	p, err := c.newProc(name, serverReady, func() []string {
		addr := "127.0.0.1:0"
		if p.match != nil {
			addr = strings.TrimPrefix(p.match[1], "https://")
		}
		return append([]string{c.cfg.Drover, "server", "--name", name, "--tls-dir", c.tlsDir, "--http-addr", addr,
			"--leader-ttl", leaderTTL.String(), "--log-level", "info"}, extra...)
	})
	if err != nil {
		return err
	}
	c.servers = append(c.servers, p)
	return p.start()
}

// waitEtcd waits until every running member answers /health as healthy.
func (c *cluster) waitEtcd(within time.Duration) error {
	deadline := time.Now().Add(within)
	hc := &http.Client{Timeout: time.Second}
	for i, u := range c.etcd {
		if len(c.members) > 0 && !c.members[i].running() {
			continue
		}
		for {
			resp, err := hc.Get(u + "/health")
			if err == nil {
				healthy := resp.StatusCode == http.StatusOK
				resp.Body.Close()
				if healthy {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("chaos: etcd at %s not healthy within %s", u, within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// server returns the server named name.
func (c *cluster) server(name string) (int, *proc) {
	for i, s := range c.servers {
		if s.name == name {
			return i, s
		}
	}
	return -1, nil
}

// leader returns the leading server other than not ("" for any),
// waiting up to within for one. (A killed leader is named until its lease
// runs out.)
func (c *cluster) leader(ctx context.Context, within time.Duration, not string) (int, *proc, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		// A short try each: a paused server takes the connection and
		// never answers; the next try goes to another server.
		actx, acancel := context.WithTimeout(ctx, time.Second)
		name, err := c.api.Leader(actx)
		acancel()
		if err != nil {
			c.api.Rotate()
		}
		if i, p := c.server(name); err == nil && p != nil && c.leads[i] && name != not && p.running() && !p.paused {
			return i, p, nil
		}
		select {
		case <-ctx.Done():
			return -1, nil, errors.New("chaos: no leader within " + within.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends every process: agents first (their tasks are the suite's to
// kill), then servers, then etcd.
func (c *cluster) stop() {
	for _, a := range c.agents {
		a.kill()
	}
	for _, s := range c.servers {
		s.kill()
	}
	for _, m := range c.members {
		m.kill()
	}
	for _, ps := range c.proxies {
		for _, p := range ps {
			p.Close()
		}
	}
	for _, p := range append(append(append([]*proc(nil), c.agents...), c.servers...), c.members...) {
		p.logf.Close()
	}
}
