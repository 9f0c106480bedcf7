package spec

import "testing"

// TestPortForms: Nomad's port forms. A label may be all digits: the group
// is valid, and a service's port = "8080" names that label (its reserved
// host port), not port 8080; where no port has that label it is the
// number. to = -1 is the unset to once canonical.
func TestPortForms(t *testing.T) {
	job := &Job{Name: "p", Type: JobService, Groups: []*Group{{
		Name:     "g",
		Count:    1,
		Network:  &Network{Ports: []Port{{Label: "8080"}, {Label: "admin", To: -1}}},
		Services: []*Service{{Name: "p", PortLabel: "8080"}},
		Tasks:    []*Task{{Name: "t", Driver: "raw_exec", Config: TaskConfig{Command: "/bin/true"}}},
	}}}
	job.Canonicalize()
	if ps := job.Validate(); len(ps) > 0 {
		t.Fatalf("not valid: %v", ps)
	}
	if to := job.Groups[0].Network.Ports[1].To; to != 0 {
		t.Errorf("to = -1 canonical: %d, want 0 (the host port's number)", to)
	}
	a := &Alloc{Ports: []AllocPort{{Label: "8080", Value: 23456, HostIP: "127.0.0.1"}}}
	if _, v, ok := a.ServicePort("8080"); !ok || v != 23456 {
		t.Errorf(`ServicePort("8080") with a port labelled "8080": %d, %v; want its host port 23456`, v, ok)
	}
	if _, v, ok := a.ServicePort("9090"); !ok || v != 9090 {
		t.Errorf(`ServicePort("9090") with no such label: %d, %v; want the number 9090`, v, ok)
	}
}
