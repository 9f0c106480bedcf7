package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	dockerclient "github.com/moby/moby/client"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/spec"
)

// requireNetworkMode skips unless the dev's node says it runs groups in
// network mode m (root, nftables); CI, which runs as root with nftables,
// fails instead.
func requireNetworkMode(t *testing.T, d *devProc, m string) *spec.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, _, err := d.client().Nodes(ctx, nil)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	if nodes[0].SupportsNetworkMode(m) {
		return nodes[0]
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI runs as root with nftables, but the node does not run network mode %s (attributes %v)", m, nodes[0].Attributes)
	}
	t.Skipf("network mode %s needs root, network namespaces and nftables; this node has none of it (uid %d)", m, os.Geteuid())
	return nil
}

// netnsOf is the network namespace of process pid, as /proc shows it.
func netnsOf(t *testing.T, pid int) string {
	t.Helper()
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// droverRules lists the user data of the rules of every drover_* nftables
// table: each DNAT rule names its alloc's namespace.
func droverRules(t *testing.T) []string {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tb := range tables {
		if !strings.HasPrefix(tb.Name, "drover_") {
			continue
		}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chains {
			if ch.Table.Name != tb.Name {
				continue
			}
			rules, err := c.GetRules(tb, ch)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rules {
				if len(r.UserData) > 0 {
					out = append(out, string(r.UserData))
				}
			}
		}
	}
	return out
}

// namespacesOf lists the namespaces in /run/netns whose name holds allocID.
func namespacesOf(allocID string) []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), allocID) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestBridgeMode: a raw_exec HTTP server in a group of network mode bridge
// runs in a network namespace of its own, listens on its port's to
// (NOMAD_PORT_http), and is reached through the node's host port on
// 127.0.0.1, as a user would curl it. Once the job stops, its namespace,
// veth and nftables rules are gone, read through netlink and nftables.
func TestBridgeMode(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	requireNetworkMode(t, d, spec.NetworkBridge)
	app := buildTestapp(t, dir)
	job := writeJob(t, dir, "br.nomad", fmt.Sprintf(`
job "br" {
  group "g" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }
    task "web" {
      driver = "raw_exec"
      config {
        command = %q
        args    = ["-report", "-listen", ":${NOMAD_PORT_http}"]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
`, app))
	if out, errOut, code := d.cli("", "run", job); code != 0 {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	allocs := d.jobStatus("br").Allocations
	if len(allocs) != 1 || len(allocs[0].Ports) != 1 || allocs[0].NetworkMode != spec.NetworkBridge {
		t.Fatalf("allocs: %s", allocsLine(allocs))
	}
	alloc, host := allocs[0].ID, allocs[0].Ports[0].Value

	url := "http://127.0.0.1:" + strconv.Itoa(host) + "/"
	var body string
	waitFor(t, 15*time.Second, "the task to answer through the host port "+url, func() bool {
		c := &http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.HasPrefix(body, "ok ") {
		t.Errorf("GET %s = %q, want testapp's ok", url, body)
	}

	pids := taskProcs("br")
	if len(pids) != 1 {
		t.Fatalf("task processes of br: %v", pids)
	}
	if in, self := netnsOf(t, pids[0]), netnsOf(t, os.Getpid()); in == self {
		t.Errorf("the task runs in the test's network namespace %s", self)
	}
	if ns := namespacesOf(alloc); len(ns) != 1 {
		t.Errorf("namespaces of alloc %s in /run/netns: %v, want one", alloc, ns)
	}

	logs, _, _ := d.cli("", "logs", "br")
	var allocIP string
	for _, kv := range []string{"NOMAD_PORT_http=8080", "NOMAD_HOST_PORT_http=" + strconv.Itoa(host),
		"NOMAD_ADDR_http=127.0.0.1:" + strconv.Itoa(host), "NOMAD_ALLOC_PORT_http=8080", "NOMAD_ALLOC_IP_http=172.26."} {
		if !strings.Contains(logs, "env "+kv) {
			t.Errorf("the task's environment lacks %s:\n%s", kv, logs)
		}
	}
	for line := range strings.Lines(logs) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "env NOMAD_ALLOC_IP_http="); ok {
			allocIP = v
		}
	}
	if allocIP != "" {
		// The server answers on the alloc's own address too, at to.
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + allocIP + ":8080/")
		if err != nil {
			t.Errorf("GET the alloc's own address %s:8080: %v", allocIP, err)
		} else {
			resp.Body.Close()
		}
	}
	veth := "dv" + strings.ReplaceAll(alloc, "-", "")[:12]
	if _, err := netlink.LinkByName(veth); err != nil {
		t.Errorf("host veth %s: %v", veth, err)
	}
	if rules := droverRules(t); !strings.Contains(strings.Join(rules, " "), alloc) {
		t.Errorf("no nftables rule names alloc %s: %v", alloc, rules)
	}

	if out, errOut, code := d.cli("", "stop", "br"); code != 0 {
		t.Fatalf("drover stop: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, 15*time.Second, "the alloc's namespace, veth and rules to be removed", func() bool {
		_, err := netlink.LinkByName(veth)
		return len(namespacesOf(alloc)) == 0 && err != nil && !strings.Contains(strings.Join(droverRules(t), " "), alloc)
	})
}

// TestNetworkModeNone: a task of a group in network mode none runs in a
// namespace that has only loopback.
func TestNetworkModeNone(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	requireNetworkMode(t, d, spec.NetworkNone)
	job := writeJob(t, dir, "iso.nomad", `
job "iso" {
  group "g" {
    network {
      mode = "none"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`)
	if out, errOut, code := d.cli("", "run", job); code != 0 {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	pids := taskProcs("iso")
	if len(pids) != 1 {
		t.Fatalf("task processes of iso: %v", pids)
	}
	ns, err := netns.GetFromPath(filepath.Join("/proc", strconv.Itoa(pids[0]), "ns/net"))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	if strings.Join(names, ",") != "lo" {
		t.Errorf("links in the task's namespace: %v, want only lo", names)
	}
	alloc := d.jobStatus("iso").Allocations[0].ID
	if out, errOut, code := d.cli("", "stop", "iso"); code != 0 {
		t.Fatalf("drover stop: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, 15*time.Second, "the alloc's namespace to be removed", func() bool { return len(namespacesOf(alloc)) == 0 })
}

const keeperBridgeJob = `
job "brk" {
  constraint {
    attribute = "${node.unique.name}"
    value     = "keeper"
  }
  group "g" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }
    task "web" {
      driver = "raw_exec"
      config {
        command = %q
        args    = ["-listen", ":${NOMAD_PORT_http}"]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
`

// TestBridgeAcrossAgentRestart: a bridge-mode task outlives its agent
// (SIGKILL) in its namespace, still reached through its host port; the
// next agent adopts it there. An alloc stopped while no agent ran has its
// namespace and rules removed by the next agent. The dev's agent shares
// the bridge drover0 with this one and keeps its own namespaces.
func TestBridgeAcrossAgentRestart(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	requireNetworkMode(t, d, spec.NetworkBridge)
	agent := startAgent(t, d, "keeper", dir+"/agent2")
	app := buildTestapp(t, dir)
	if out, errOut, code := d.cli("", "run", writeJob(t, dir, "brk.nomad", fmt.Sprintf(keeperBridgeJob, app))); code != 0 {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	a := d.jobStatus("brk").Allocations[0]
	alloc, url := a.ID, "http://127.0.0.1:"+strconv.Itoa(a.Ports[0].Value)+"/"
	answers := func() bool {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	waitFor(t, 15*time.Second, "the task to answer at "+url, answers)
	pid := a.Status.Tasks["web"].PID
	ns := netnsOf(t, pid)

	agent.Process.Kill()
	agent.Wait()
	if !answers() {
		t.Fatalf("with its agent killed, the task no longer answers at %s", url)
	}
	agent = startAgent(t, d, "keeper", dir+"/agent2")
	waitFor(t, 20*time.Second, "the task adopted", func() bool {
		ts := d.jobStatus("brk").Allocations[0].Status.Tasks["web"]
		return ts.State == spec.TaskRunning && ts.Events[len(ts.Events)-1].Type == spec.EventAdopted
	})
	if got := netnsOf(t, pid); got != ns || zombie(pid) {
		t.Fatalf("after the agent restart: pid %d in %s, want it alive in %s", pid, got, ns)
	}
	if !answers() || len(namespacesOf(alloc)) != 1 {
		t.Fatalf("after the agent restart: answers %v, namespaces %v", answers(), namespacesOf(alloc))
	}
	// drover exec in the adopted task runs beside it, in its namespace.
	if out, errOut, code := d.cli("", "exec", "brk", "--", "readlink", "/proc/self/ns/net"); code != 0 || strings.TrimSpace(out) != ns {
		t.Errorf("drover exec in the adopted task: exit %d, namespace %q, want %q\n%s", code, strings.TrimSpace(out), ns, errOut)
	}

	// Stopped while no agent runs: the next one cleans up.
	agent.Process.Kill()
	agent.Wait()
	if out, errOut, code := d.cli("", "stop", "--detach", "brk"); code != 0 {
		t.Fatalf("drover stop: exit %d\n%s\n%s", code, out, errOut)
	}
	startAgent(t, d, "keeper", dir+"/agent2")
	waitFor(t, 20*time.Second, "the stopped alloc's namespace, veth and rules removed", func() bool {
		_, err := netlink.LinkByName("dv" + strings.ReplaceAll(alloc, "-", "")[:12])
		return len(namespacesOf(alloc)) == 0 && err != nil && !strings.Contains(strings.Join(droverRules(t), " "), alloc)
	})
	if !zombie(pid) {
		t.Errorf("task pid %d still runs after its job was stopped", pid)
	}
}

// TestBridgeModeDocker: a docker task in a bridge-mode group keeps
// docker's own network: the port it maps is forwarded by docker to its
// container (no DNAT rule into the namespace takes it), and a raw_exec
// task beside it has its port forwarded into the namespace.
func TestBridgeModeDocker(t *testing.T) {
	dc := dockertest.Require(t)
	image := dockertest.Image(t)
	t.Cleanup(func() {
		for _, id := range containersOfJob(t, dc, "brd") {
			dc.ContainerRemove(context.Background(), id, dockerclient.ContainerRemoveOptions{Force: true})
		}
	})
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	requireNetworkMode(t, d, spec.NetworkBridge)
	app := buildTestapp(t, dir)
	job := writeJob(t, dir, "brd.nomad", fmt.Sprintf(`
job "brd" {
  group "g" {
    network {
      mode = "bridge"
      port "web" {
        to = 8080
      }
      port "side" {
        to = 9090
      }
    }
    task "container" {
      driver = "docker"
      config {
        image = %q
        args  = ["-listen", "0.0.0.0:8080"]
        ports = ["web"]
      }
      resources {
        memory = 64
      }
    }
    task "process" {
      driver = "raw_exec"
      config {
        command = %q
        args    = ["-listen", ":${NOMAD_PORT_side}"]
      }
      resources {
        memory = 64
      }
    }
  }
}
`, image, app))
	if out, errOut, code := d.cli("", "run", job); code != 0 {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	a := d.jobStatus("brd").Allocations[0]
	for _, p := range a.Ports {
		url := "http://127.0.0.1:" + strconv.Itoa(p.Value) + "/"
		waitFor(t, 30*time.Second, p.Label+" answering at "+url, func() bool {
			resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	n := 0
	for _, r := range droverRules(t) {
		if strings.Contains(r, a.ID) {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d DNAT rules for the alloc, want 4: the raw_exec task's port only (tcp and udp, prerouting and output)", n)
	}
}
