package catalog

import (
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/google/go-cmp/cmp"
)

// alloc is a running alloc of job "web" with one task "t" that serves svcs,
// on node n1, with an http port 8080 on 10.0.0.1.
func alloc(id string, index int, ts *spec.TaskState, svcs ...*spec.Service) *spec.Alloc {
	a := &spec.Alloc{
		ID: id, Name: spec.AllocName("web", "g", index), Job: "web", Group: "g", Index: index,
		NodeID: "n1", NodeName: "node-1", DesiredStatus: spec.DesiredRun,
		Ports: []spec.AllocPort{{Label: "admin", Value: 9000, HostIP: "10.0.0.1"}, {Label: "http", Value: 8080, HostIP: "10.0.0.1"}},
		Tasks: []*spec.Task{{Name: "t", Services: svcs}},
	}
	if ts != nil {
		a.Status = &spec.AllocStatus{ClientStatus: spec.ClientRunning, Tasks: map[string]*spec.TaskState{"t": ts}}
	}
	return a
}

var (
	api     = &spec.Service{Name: "api", PortLabel: "http", Tags: []string{"v1"}}
	checked = &spec.Service{Name: "api", PortLabel: "http", Tags: []string{"v2", "v1"}, Checks: []*spec.Check{{Name: "h", Type: spec.CheckHTTP}, {Name: "t", Type: spec.CheckTCP}}}
	noPort  = &spec.Service{Name: "worker"}
)

func running(checks ...spec.CheckState) *spec.TaskState {
	return &spec.TaskState{State: spec.TaskRunning, Checks: checks}
}

func check(svc, name string, st spec.CheckStatus) spec.CheckState {
	return spec.CheckState{Service: svc, Check: name, Status: st, Output: string(st)}
}

func TestBuildHealthAndAddresses(t *testing.T) {
	base := spec.ServiceInstance{Service: "api", Tags: []string{"v1"}, Address: "10.0.0.1", Port: 8080,
		AllocID: "a1", AllocName: "web.g[0]", Job: "web", Task: "t", NodeID: "n1", NodeName: "node-1"}
	with := func(f func(*spec.ServiceInstance)) spec.ServiceInstance {
		in := base
		f(&in)
		return in
	}
	pass, fail, pend := check("api", "h", spec.CheckPassing), check("api", "t", spec.CheckFailing), check("api", "t", spec.CheckPending)
	other := check("other", "x", spec.CheckFailing)
	cases := []struct {
		name  string
		alloc *spec.Alloc
		want  []spec.ServiceInstance
	}{
		{"no checks, running: healthy", alloc("a1", 0, running(), api),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Health = spec.HealthHealthy })}},
		{"no checks, no report yet: pending", alloc("a1", 0, nil, api),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Health = spec.HealthPending })}},
		{"no checks, task not started: pending", alloc("a1", 0, &spec.TaskState{State: spec.TaskPending}, api),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Health = spec.HealthPending })}},
		{"no checks, task restarting: unhealthy", alloc("a1", 0, &spec.TaskState{State: spec.TaskPending, StartedAt: time.Unix(1, 0), Restarts: 1}, api),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Health = spec.HealthUnhealthy })}},
		{"no checks, task dead: unhealthy", alloc("a1", 0, &spec.TaskState{State: spec.TaskDead}, api),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Health = spec.HealthUnhealthy })}},
		{"every check passes: healthy; other services' checks are not this one's",
			alloc("a1", 0, running(pass, other, check("api", "t", spec.CheckPassing)), checked),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) {
				i.Health, i.Tags = spec.HealthHealthy, []string{"v2", "v1"}
				i.Checks = []spec.CheckState{pass, check("api", "t", spec.CheckPassing)}
			})}},
		{"one check fails: unhealthy", alloc("a1", 0, running(pass, fail), checked),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) {
				i.Health, i.Tags, i.Checks = spec.HealthUnhealthy, []string{"v2", "v1"}, []spec.CheckState{pass, fail}
			})}},
		{"one check pending: pending", alloc("a1", 0, running(pass, pend), checked),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) {
				i.Health, i.Tags, i.Checks = spec.HealthPending, []string{"v2", "v1"}, []spec.CheckState{pass, pend}
			})}},
		{"a declared check not reported yet: pending", alloc("a1", 0, running(pass), checked),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) {
				i.Health, i.Tags, i.Checks = spec.HealthPending, []string{"v2", "v1"}, []spec.CheckState{pass}
			})}},
		{"checks passed but the task is dead: unhealthy", alloc("a1", 0, &spec.TaskState{State: spec.TaskDead, Checks: []spec.CheckState{pass, check("api", "t", spec.CheckPassing)}}, checked),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) {
				i.Health, i.Tags, i.Checks = spec.HealthUnhealthy, []string{"v2", "v1"}, []spec.CheckState{pass, check("api", "t", spec.CheckPassing)}
			})}},
		{"no port: the alloc's first port's address, port 0", alloc("a1", 0, running(), noPort),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) {
				i.Service, i.Tags, i.Port, i.Health = "worker", nil, 0, spec.HealthHealthy
			})}},
		{"a port written as a number: that port, at the alloc's address", alloc("a1", 0, running(), &spec.Service{Name: "api", PortLabel: "9001", Tags: []string{"v1"}}),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Port, i.Health = 9001, spec.HealthHealthy })}},
		{"a port written as a number, no ports at all: that port, at the default address", func() *spec.Alloc {
			a := alloc("a1", 0, running(), &spec.Service{Name: "api", PortLabel: "9001", Tags: []string{"v1"}})
			a.Ports = nil
			return a
		}(),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Address, i.Port, i.Health = DefaultAddress, 9001, spec.HealthHealthy })}},
		{"no ports at all: the default address", func() *spec.Alloc { a := alloc("a1", 0, running(), api); a.Ports = nil; return a }(),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Address, i.Port, i.Health = DefaultAddress, 0, spec.HealthHealthy })}},
		{"a port without a host IP: the default address", func() *spec.Alloc { a := alloc("a1", 0, running(), api); a.Ports[1].HostIP = ""; return a }(),
			[]spec.ServiceInstance{with(func(i *spec.ServiceInstance) { i.Address, i.Health = DefaultAddress, spec.HealthHealthy })}},
		{"desired stop: gone", func() *spec.Alloc { a := alloc("a1", 0, running(), api); a.DesiredStatus = spec.DesiredStop; return a }(), nil},
		{"terminal: gone", func() *spec.Alloc {
			a := alloc("a1", 0, running(), api)
			a.Status.ClientStatus = spec.ClientFailed
			return a
		}(), nil},
		{"node down: gone", func() *spec.Alloc { a := alloc("a1", 0, running(), api); a.NodeDown = true; return a }(), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Build([]*spec.Alloc{c.alloc}, nil).Instances()
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("instances (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceSummariesAndOrder(t *testing.T) {
	unhealthy := running(check("api", "h", spec.CheckPassing), check("api", "t", spec.CheckFailing))
	healthy := running(check("api", "h", spec.CheckPassing), check("api", "t", spec.CheckPassing))
	c := Build([]*spec.Alloc{
		alloc("c3", 2, healthy, checked),
		alloc("a1", 0, running(), api, noPort),
		alloc("b2", 1, unhealthy, checked),
	}, nil)
	var order []string
	for _, in := range c.Instances() {
		order = append(order, in.Service+" "+in.AllocName+" "+string(in.Health))
	}
	want := []string{"api web.g[0] healthy", "api web.g[1] unhealthy", "api web.g[2] healthy", "worker web.g[0] healthy"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	wantSum := []spec.ServiceSummary{
		{Name: "api", Tags: []string{"v1", "v2"}, Healthy: 2, Instances: 3},
		{Name: "worker", Healthy: 1, Instances: 1},
	}
	if diff := cmp.Diff(wantSum, c.Summaries()); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
	served, ok := c.Service("API", false)
	if !ok || len(served) != 2 || served[0].AllocID != "a1" || served[1].AllocID != "c3" {
		t.Errorf("healthy api instances: ok=%v %+v", ok, served)
	}
	if all, _ := c.Service("api", true); len(all) != 3 {
		t.Errorf("all api instances: %d, want 3", len(all))
	}
	if _, ok := c.Service("nope", true); ok {
		t.Error("an unknown service is known")
	}
	if diff := cmp.Diff([]string{"api", "worker"}, c.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	empty := Build(nil, nil)
	if len(empty.Summaries()) != 0 || len(empty.Instances()) != 0 {
		t.Errorf("empty catalog: %+v", empty.Summaries())
	}
}

// A service's name and tags are interpolated with the alloc's runtime
// variables and its node's values, as its agent names the service in its
// check states, so that the two meet.
func TestBuildInterpolatesNamesAndTags(t *testing.T) {
	svc := &spec.Service{Name: "api-${NOMAD_ALLOC_INDEX}", PortLabel: "http", Tags: []string{"${meta.rack}", "${attr.nope}"},
		Checks: []*spec.Check{{Name: "h", Type: spec.CheckHTTP}}}
	a := alloc("a1", 2, running(check("api-2", "h", spec.CheckPassing)), svc)
	nodes := map[string]*spec.Node{"n1": {ID: "n1", Name: "node-1", Meta: map[string]string{"rack": "r1"}}}
	c := Build([]*spec.Alloc{a}, func(id string) *spec.Node { return nodes[id] })
	ins, ok := c.Service("api-2", false)
	if !ok || len(ins) != 1 {
		t.Fatalf("healthy api-2 instances: ok=%v %+v; all: %+v", ok, ins, c.Instances())
	}
	if diff := cmp.Diff([]string{"r1", "${attr.nope}"}, ins[0].Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	// Without the node, its values stay as written.
	if in := Build([]*spec.Alloc{a}, nil).Instances()[0]; in.Service != "api-2" || in.Tags[0] != "${meta.rack}" {
		t.Errorf("without nodes: %+v", in)
	}
	if svc.Name != "api-${NOMAD_ALLOC_INDEX}" {
		t.Errorf("the job's service changed: %+v", svc)
	}
}
