package main

// drover-bench health: how fast a failing check shows.
//
//	go run ./cmd/drover-bench health                  # 10 failures, 1 s check interval
//	go run ./cmd/drover-bench health -interval 200ms
//
// It starts `drover dev` with its DNS server on a free port, runs one
// instance of internal/testapp (raw_exec) registered as a service with an
// HTTP check on /health, and waits until the instance is healthy and in
// DNS. Then, each round, it makes /health fail (POST /fail) and times:
//
//   - fail -> unhealthy: until the services API (a blocking query) shows
//     the instance unhealthy;
//   - fail -> out of DNS: until <name>.service.drover has no A record
//     (queried every 2 ms);
//
// then makes it pass again and waits for it to come back. A failure is seen
// at the first probe after it, so both times include a wait for that probe;
// rounds fail at phases spread evenly over the interval, so the figures
// show that wait as it falls. testapp notes when it first answered a probe
// with 503, and the report also gives both times from that probe: what
// drover itself adds (the agent's verdict, its report, the catalog, DNS).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{name: "health", about: "a failing HTTP check: time until the instance shows unhealthy, and until it leaves DNS", flags: healthFlags})
}

func healthFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	rounds := fs.Int("rounds", 10, "failures to time (-quick: 3)")
	interval := fs.Duration("interval", time.Second, "the check's interval")
	return func() (*report, error) {
		return health(o.drover, sized(fs, o, "rounds", *rounds, 3), *interval)
	}
}

const healthService = "bench-web"

func health(bin string, rounds int, interval time.Duration) (*report, error) {
	tmp, err := os.MkdirTemp("", "drover-bench-health-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	app, err := buildTestapp(tmp)
	if err != nil {
		return nil, err
	}
	dnsAddr, err := freeUDPAddr()
	if err != nil {
		return nil, err
	}
	c, _, stop, err := devNode(bin, filepath.Join(tmp, "data"), "--dns-addr", dnsAddr)
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	job := &spec.Job{Name: "bench-health", Groups: []*spec.Group{{
		Name: "g", Count: 1,
		Network: &spec.Network{Ports: []spec.Port{{Label: "http"}}},
		Tasks: []*spec.Task{{
			Name: "web", Driver: "raw_exec",
			Config:    spec.TaskConfig{Command: app},
			Resources: spec.Resources{CPU: 10, MemoryMB: 32},
			Services: []*spec.Service{{Name: healthService, PortLabel: "http", Checks: []*spec.Check{{
				Type: spec.CheckHTTP, Path: "/health",
				Interval: spec.Duration(interval), Timeout: spec.Duration(min(interval, 500*time.Millisecond)),
			}}}},
		}},
	}}}
	job.Canonicalize()
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return nil, err
	}
	defer c.StopJob(context.Background(), job.Name, true)

	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", dnsAddr)
	}}
	inDNS := func() bool {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		addrs, err := res.LookupHost(qctx, healthService+".service.drover")
		return err == nil && len(addrs) > 0
	}
	// The instance's own address, from the catalog, to make it fail.
	var inst spec.ServiceInstance
	if err := waitFor(ctx, 60*time.Second, "the instance healthy and in DNS", func() (bool, error) {
		is, _, err := serviceInstances(ctx, c, 0)
		if err != nil || len(is) != 1 || is[0].Health != spec.HealthHealthy {
			return false, nil
		}
		inst = is[0]
		return inDNS(), nil
	}); err != nil {
		return nil, err
	}
	appURL := "http://" + net.JoinHostPort(inst.Address, strconv.Itoa(inst.Port))

	var toUnhealthy, toDNS, probeToUnhealthy, probeToDNS []time.Duration
	for r := 0; r < rounds; r++ {
		_, index, err := serviceInstances(ctx, c, 0)
		if err != nil {
			return nil, err
		}
		// Recovery was seen just after a probe: fail at phase r/rounds of
		// the interval past it.
		time.Sleep(time.Duration(r) * interval / time.Duration(rounds))
		t0 := time.Now()
		if err := post(ctx, appURL+"/fail"); err != nil {
			return nil, err
		}
		seen := make(chan error, 1)
		go func() {
			for {
				is, idx, err := serviceInstances(ctx, c, index)
				if err != nil {
					seen <- err
					return
				}
				index = idx
				if len(is) == 1 && is[0].Health == spec.HealthUnhealthy {
					toUnhealthy = append(toUnhealthy, time.Since(t0))
					seen <- nil
					return
				}
			}
		}()
		for inDNS() {
			if time.Since(t0) > 10*interval+30*time.Second {
				return nil, fmt.Errorf("round %d: the failing instance is still in DNS after %s", r, time.Since(t0).Round(time.Millisecond))
			}
			time.Sleep(2 * time.Millisecond)
		}
		tDNS := time.Now()
		toDNS = append(toDNS, tDNS.Sub(t0))
		if err := <-seen; err != nil {
			return nil, err
		}
		probe, err := failedAt(ctx, appURL)
		if err != nil {
			return nil, err
		}
		probeToUnhealthy = append(probeToUnhealthy, t0.Add(toUnhealthy[len(toUnhealthy)-1]).Sub(probe))
		probeToDNS = append(probeToDNS, tDNS.Sub(probe))
		if err := post(ctx, appURL+"/recover"); err != nil {
			return nil, err
		}
		if err := waitFor(ctx, 10*interval+30*time.Second, "the instance healthy and in DNS again", func() (bool, error) {
			is, _, err := serviceInstances(ctx, c, 0)
			return err == nil && len(is) == 1 && is[0].Health == spec.HealthHealthy && inDNS(), nil
		}); err != nil {
			return nil, err
		}
	}
	rep := newReport("health")
	rep.linef("drover-bench health: %d failures of an HTTP check with interval %s, raw_exec testapp, drover dev", rounds, interval)
	rep.linef("fail -> shown unhealthy (API)           %s", dist(toUnhealthy))
	rep.linef("fail -> removed from DNS                %s", dist(toDNS))
	rep.linef("failing probe -> shown unhealthy (API)  %s", dist(probeToUnhealthy))
	rep.linef("failing probe -> removed from DNS       %s", dist(probeToDNS))
	rep.linef("(fail -> ... includes the wait for the next probe, up to the %s interval; failing probe -> ... is drover's own part)", interval)
	rep.set("rounds", rounds)
	rep.set("interval_ms", interval.Milliseconds())
	rep.setDist("fail_to_unhealthy", toUnhealthy)
	rep.setDist("fail_to_dns_removal", toDNS)
	rep.setDist("probe_to_unhealthy", probeToUnhealthy)
	rep.setDist("probe_to_dns_removal", probeToDNS)
	return rep, nil
}

// serviceInstances reads every instance of the bench's service, healthy or
// not, as a blocking query past index when index > 0.
func serviceInstances(ctx context.Context, c *client.Client, index int64) ([]spec.ServiceInstance, int64, error) {
	var q *client.QueryOptions
	if index > 0 {
		q = &client.QueryOptions{Index: index, Wait: 30 * time.Second}
	}
	out, idx, err := c.Service(ctx, healthService, true, q)
	if client.IsStatus(err, http.StatusNotFound) {
		return nil, index, nil // not registered yet
	}
	return out, idx, err
}

// failedAt asks testapp when it first answered a probe with 503.
func failedAt(ctx context.Context, appURL string) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", appURL+"/failed-at", nil)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	var ns int64
	if _, err := fmt.Fscan(resp.Body, &ns); err != nil || ns == 0 {
		return time.Time{}, fmt.Errorf("testapp did not say when it failed a probe (%d, %v)", ns, err)
	}
	return time.Unix(0, ns), nil
}

func post(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, "POST", u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", u, resp.Status)
	}
	return nil
}

// waitFor polls cond every 20 ms until it holds, fails, or within passes.
func waitFor(ctx context.Context, within time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", within, what)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), fmt.Errorf("waiting for %s", what))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freeUDPAddr returns a loopback address whose UDP port was free a moment
// ago (the DNS server listens on both UDP and TCP there).
func freeUDPAddr() (string, error) {
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		a := pc.LocalAddr().String()
		pc.Close()
		if l, err := net.Listen("tcp", a); err == nil {
			l.Close()
			return a, nil
		}
	}
	return "", errors.New("no free port for DNS on 127.0.0.1")
}

// buildTestapp builds internal/testapp (an HTTP server with /health) into
// dir and returns the binary's path.
func buildTestapp(dir string) (string, error) {
	app := filepath.Join(dir, "testapp")
	if out, err := exec.Command("go", "build", "-o", app, "github.com/drover-org/drover/internal/testapp").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building internal/testapp (run from the module root): %v\n%s", err, out)
	}
	return app, nil
}
