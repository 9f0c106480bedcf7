// Package catalog derives the service catalog from the allocations: every
// service of every task of every live alloc is an instance, with its
// address, port and health. It is pure (no I/O, no clock): the server
// builds a Catalog from what it read, and the API and the DNS server read
// it.
//
// An instance's health:
//
//	task not running          any check failing, or it ran before (restarting,
//	                          dead) -> unhealthy; else (not started) pending
//	running, no checks        healthy
//	running, checks           all passing -> healthy; any failing ->
//	                          unhealthy; else (no verdict yet) pending
//
// Only healthy instances are served by default (DNS, GET
// /v1/services/{name}); the others are listed on request, with their
// checks, to say why.
package catalog

import (
	"cmp"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// DefaultAddress is the address of an instance whose alloc reserved no
// port with a host IP, as spec.NodeIPAttribute's default.
const DefaultAddress = spec.DefaultNodeIP

// Catalog is the catalog at one moment. It is not modified after Build, so
// readers may share it.
type Catalog struct {
	instances []spec.ServiceInstance            // sorted: see compareInstances
	byName    map[string][]spec.ServiceInstance // lower-case name -> its instances
	names     []string                          // the services' names as declared, sorted
}

// Build returns the catalog of allocs. An alloc counts while it is wanted
// (desired run), not terminal, and its node is up (NodeDown must be set,
// as the server's read marks it): an instance on a node that stopped
// heartbeating is not known to be there. A service's name and tags are
// interpolated as its agent names them (spec.TaskRuntime.Service), with
// the values of the node that node returns by ID (nil: none).
func Build(allocs []*spec.Alloc, node func(id string) *spec.Node) *Catalog {
	c := &Catalog{}
	for _, a := range allocs {
		if a.DesiredStatus != spec.DesiredRun || a.Terminal() || a.NodeDown {
			continue
		}
		for _, t := range a.Tasks {
			var ts *spec.TaskState
			if a.Status != nil {
				ts = a.Status.Tasks[t.Name]
			}
			for _, svc := range t.Services {
				if svc == nil {
					continue
				}
				rt := spec.TaskRuntime{Alloc: a, Task: t}
				if node != nil {
					rt.Node = node(a.NodeID)
				}
				c.instances = append(c.instances, instance(a, t, ts, rt.Service(svc)))
			}
		}
	}
	slices.SortFunc(c.instances, compareInstances)
	c.index()
	return c
}

// Visible returns the catalog of the instances whose namespace keep
// accepts (an ACL token's view).
func (c *Catalog) Visible(keep func(namespace string) bool) *Catalog {
	v := &Catalog{}
	for _, in := range c.instances {
		if keep(in.Namespace) {
			v.instances = append(v.instances, in)
		}
	}
	v.index()
	return v
}

// index fills byName and names from the sorted instances.
func (c *Catalog) index() {
	c.byName = map[string][]spec.ServiceInstance{}
	for _, in := range c.instances {
		key := strings.ToLower(in.Service)
		if _, ok := c.byName[key]; !ok {
			c.names = append(c.names, in.Service)
		}
		c.byName[key] = append(c.byName[key], in)
	}
}

func instance(a *spec.Alloc, t *spec.Task, ts *spec.TaskState, svc *spec.Service) spec.ServiceInstance {
	in := spec.ServiceInstance{
		Service:   svc.Name,
		Tags:      slices.Clone(svc.Tags),
		AllocID:   a.ID,
		AllocName: a.Name,
		Job:       a.Job,
		Namespace: a.Namespace,
		Task:      t.Name,
		NodeID:    a.NodeID,
		NodeName:  a.NodeName,
	}
	// The port's own host IP; with no port, or a port written as a
	// number, the alloc's address.
	in.Address, in.Port, _ = a.ServicePort(svc.PortLabel)
	if ts != nil {
		for _, cs := range ts.Checks {
			if cs.Service == svc.Name {
				in.Checks = append(in.Checks, cs)
			}
		}
	}
	in.Health = health(ts, svc, in.Checks)
	return in
}

// health is the instance's health; see the package comment.
func health(ts *spec.TaskState, svc *spec.Service, checks []spec.CheckState) spec.Health {
	failing, passing := 0, 0
	for _, cs := range checks {
		switch cs.Status {
		case spec.CheckFailing:
			failing++
		case spec.CheckPassing:
			passing++
		}
	}
	switch {
	case failing > 0:
		return spec.HealthUnhealthy
	case ts == nil:
		return spec.HealthPending
	case ts.State != spec.TaskRunning && (ts.State == spec.TaskDead || !ts.StartedAt.IsZero()):
		// It ran and stopped, as the agent's alloc health says.
		return spec.HealthUnhealthy
	case ts.State != spec.TaskRunning:
		return spec.HealthPending
	case passing >= len(svc.Checks) && passing == len(checks):
		// Every declared check reported, and passes: a check the agent has
		// not reported yet has no verdict.
		return spec.HealthHealthy
	}
	return spec.HealthPending
}

func compareInstances(x, y spec.ServiceInstance) int {
	return cmp.Or(
		cmp.Compare(x.Service, y.Service),
		cmp.Compare(x.AllocName, y.AllocName),
		cmp.Compare(x.AllocID, y.AllocID),
		cmp.Compare(x.Task, y.Task),
		cmp.Compare(x.Port, y.Port),
	)
}

// Instances returns every instance, of every service and health, sorted by
// service, alloc name and task. Callers must not modify them.
func (c *Catalog) Instances() []spec.ServiceInstance { return c.instances }

// Names returns the services' names, sorted.
func (c *Catalog) Names() []string { return c.names }

// Service returns the instances of the service name (compared without
// regard to case, as DNS does): the healthy ones, or with all every one.
// ok is false when no instance of any health has that name. Callers must
// not modify the instances.
func (c *Catalog) Service(name string, all bool) (instances []spec.ServiceInstance, ok bool) {
	ins, ok := c.byName[strings.ToLower(name)]
	if !ok || all {
		return ins, ok
	}
	healthy := make([]spec.ServiceInstance, 0, len(ins))
	for _, in := range ins {
		if in.Health == spec.HealthHealthy {
			healthy = append(healthy, in)
		}
	}
	return healthy, true
}

// Summaries returns one summary per service, sorted by name: the union of
// its instances' tags, and how many instances are healthy of how many.
func (c *Catalog) Summaries() []spec.ServiceSummary {
	out := make([]spec.ServiceSummary, 0, len(c.names))
	for _, name := range c.names {
		s := spec.ServiceSummary{Name: name}
		for _, in := range c.byName[strings.ToLower(name)] {
			s.Instances++
			if in.Health == spec.HealthHealthy {
				s.Healthy++
			}
			for _, tag := range in.Tags {
				if !slices.Contains(s.Tags, tag) {
					s.Tags = append(s.Tags, tag)
				}
			}
		}
		slices.Sort(s.Tags)
		out = append(out, s)
	}
	return out
}
