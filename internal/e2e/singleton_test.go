package e2e

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// proxy is a TCP relay an agent reaches its server through; cutting it is
// a network partition between that agent and every server, on loopback.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: strings.TrimPrefix(target, "https://")}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	return p
}

func (p *proxy) addr() string { return "https://" + p.ln.Addr().String() }

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

var serverAPI = regexp.MustCompile(`API at (https://[^,\s]+)`)

// startServer runs `drover server` with an embedded etcd on free ports. It
// makes the cluster's certificates in dataDir/tls (agents take theirs from
// there too); the returned devProc's client and cli use them and the ACL
// bootstrap token.
func startServer(t *testing.T, dataDir string) *devProc {
	t.Helper()
	cmd := exec.Command(droverBin, "server", "--name", "s1", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0",
		"--etcd-client-addr", "127.0.0.1:0", "--etcd-peer-addr", "127.0.0.1:0", "--log-level", "warn")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := serverAPI.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	d := &devProc{t: t, tlsDir: filepath.Join(dataDir, "tls")}
	select {
	case d.addr = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatal("drover server did not print its address within 60s")
	}
	tok, err := d.client().ACLBootstrap(t.Context())
	if err != nil {
		t.Fatalf("acl bootstrap: %v", err)
	}
	d.token = tok.SecretID
	return d
}

// Singleton safety: the node running a `disconnect { stop_after }` job is
// cut off from the servers. Its agent stops the task after stop_after; the
// leader places the replacement only later. A witness file the task
// appends to shows the two copies never ran at the same time.
func TestSingletonNeverOverlapsAcrossAPartition(t *testing.T) {
	dir := t.TempDir()
	// Runs after the agents are killed (cleanups run last registered
	// first) and before dir is removed.
	t.Cleanup(func() { testbin.KillTasks(t, "e2esingle", dir) })
	d := startServer(t, dir+"/server")
	c := d.client()
	proxies := map[string]*proxy{}
	for _, name := range []string{"n1", "n2"} {
		p := startProxy(t, d.addr)
		proxies[name] = p
		cmd := exec.Command(droverBin, "agent", "--server", p.addr(), "--data-dir", dir+"/"+name,
			"--tls-dir", d.tlsDir, "--http-addr", "127.0.0.1:0", "--name", name, "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	waitFor(t, 30*time.Second, "two nodes ready", func() bool {
		nodes, _, err := c.Nodes(t.Context(), nil)
		ready := 0
		for _, n := range nodes {
			if n.Status == spec.NodeReady {
				ready++
			}
		}
		return err == nil && ready == 2
	})

	witness := dir + "/witness.log"
	job := writeJob(t, dir, "single.hcl", `
job "e2esingle" {
  group "db" {
    count = 1
    disconnect {
      stop_after = "3s"
    }
    task "primary" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "while :; do echo \"$DROVER_ALLOC_ID $(date +%s%N)\" >> `+witness+`; sleep 0.05; done"]
      }
      resources {
        cpu    = 10
        memory = 8
      }
      kill_timeout = "1s"
    }
  }
}
`)
	if out, errOut, code := d.cli("", "run", "--min-healthy-time", "1s", job); code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	st := d.jobStatus("e2esingle")
	first := st.Allocations[0]

	// Partition the node that runs it.
	cut := time.Now()
	proxies[first.NodeName].setCut(true)
	var second *spec.Alloc
	waitFor(t, 40*time.Second, "the replacement running on the other node", func() bool {
		for _, a := range d.jobStatus("e2esingle").Allocations {
			if a.ID != first.ID && a.ClientStatusOr() == spec.ClientRunning {
				second = a
				return true
			}
		}
		return false
	})
	time.Sleep(time.Second) // let the new copy write a few lines
	t.Logf("partition -> replacement running: %s", time.Since(cut).Round(10*time.Millisecond))

	spans := witnessSpans(t, witness)
	old, neu := spans[first.ID], spans[second.ID]
	if old.n == 0 || neu.n == 0 {
		t.Fatalf("witness lines: old copy %d, new copy %d", old.n, neu.n)
	}
	gap := neu.first.Sub(old.last)
	t.Logf("old copy's last line %s after the cut; new copy's first line %s after the old one's last",
		old.last.Sub(cut).Round(10*time.Millisecond), gap.Round(10*time.Millisecond))
	if !old.last.Before(neu.first) {
		t.Fatalf("the two copies overlapped: old ran until %s, new started at %s", old.last, neu.first)
	}
	if stopped := old.last.Sub(cut); stopped > 3*time.Second+1500*time.Millisecond {
		t.Fatalf("the cut-off agent stopped its copy %s after the cut; want about stop_after (3s)", stopped)
	}

	// Heal: the node comes back, learns its copy was replaced, and says why
	// it stopped it.
	proxies[first.NodeName].setCut(false)
	var last *spec.Alloc
	deadline := time.Now().Add(45 * time.Second)
	for {
		for _, a := range d.jobStatus("e2esingle").Allocations {
			if a.ID == first.ID {
				last = a
			}
		}
		if last != nil && last.Terminal() && last.Status != nil && strings.Contains(last.Status.Description, "no contact with any server") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("45s after healing, the old copy is not reported stopped with the fencing reason: %+v status %+v", last, last.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type span struct {
	first, last time.Time
	n           int
}

func witnessSpans(t *testing.T, path string) map[string]span {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]span{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	sort.Strings(lines)
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		ts := time.Unix(0, ns)
		s := out[f[0]]
		if s.n == 0 || ts.Before(s.first) {
			s.first = ts
		}
		if ts.After(s.last) {
			s.last = ts
		}
		s.n++
		out[f[0]] = s
	}
	return out
}
