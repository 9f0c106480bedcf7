package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestPrintServicesAndInstances(t *testing.T) {
	var b strings.Builder
	printServices(&b, []spec.ServiceSummary{{Name: "api", Tags: []string{"v1", "v2"}, Healthy: 1, Instances: 2}, {Name: "bare", Instances: 1}})
	printServices(&b, nil)
	ins := []spec.ServiceInstance{
		{Service: "api", Address: "10.0.0.1", Port: 8080, Health: spec.HealthHealthy, AllocID: "0123456789ab", AllocName: "web.g[0]", NodeName: "n1",
			Checks: []spec.CheckState{{Check: "alive", Status: spec.CheckPassing, Output: "HTTP 200"}, {Check: "port", Status: spec.CheckPassing}}},
		{Service: "api", Address: "fd00::2", Port: 8081, Health: spec.HealthUnhealthy, AllocID: "abcdef012345", AllocName: "web.g[1]", NodeName: "n2",
			Checks: []spec.CheckState{{Check: "alive", Status: spec.CheckFailing, Output: "HTTP 500"}}},
		{Service: "api", Address: "10.0.0.3", Health: spec.HealthPending, AllocID: "fedcba987654", AllocName: "web.g[2]"},
	}
	b.WriteString("--\n")
	printInstances(&b, "api", ins, false)
	b.WriteString("--\n")
	printInstances(&b, "api", ins, true)
	b.WriteString("--\n")
	printInstances(&b, "api", ins[1:], false)
	want := `NAME  HEALTHY  TAGS
api   1/2      v1,v2
bare  0/1      -
No services. A task registers one with a service block; see docs/services.md.
--
ADDRESS        HEALTH   ALLOC              NODE  CHECKS
10.0.0.1:8080  healthy  01234567 web.g[0]  n1    alive passing (HTTP 200), port passing

2 more pending or unhealthy; see --all
--
ADDRESS         HEALTH     ALLOC              NODE  CHECKS
10.0.0.1:8080   healthy    01234567 web.g[0]  n1    alive passing (HTTP 200), port passing
[fd00::2]:8081  unhealthy  abcdef01 web.g[1]  n2    alive failing (HTTP 500)
10.0.0.3        pending    fedcba98 web.g[2]  -     -
--
No healthy instance of api: 2 pending or unhealthy; see drover services api --all
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
