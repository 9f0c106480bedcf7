package spec

import (
	"strings"
	"testing"
)

// TestSystemJobUpdateIsDropped: a system job with update blocks (Nomad
// writes them) is valid and canonicalizes without them; a batch job's is
// still refused, and a sysbatch job's.
func TestSystemJobUpdateIsDropped(t *testing.T) {
	mk := func(typ JobType) *Job {
		two := 2
		return &Job{Name: "j", Type: typ, Update: &UpdateStrategy{MaxParallel: &two},
			Groups: []*Group{{Name: "g", Count: 1, Update: &UpdateStrategy{MaxParallel: &two},
				Tasks: []*Task{{Name: "t", Driver: "raw_exec", Config: TaskConfig{Command: "/bin/true"}}}}}}
	}
	j := mk(JobSystem)
	j.Canonicalize()
	if ps := j.Validate(); len(ps) > 0 {
		t.Fatalf("system job with update: %v", ps)
	}
	if j.Update != nil || j.Groups[0].Update != nil {
		t.Errorf("system job kept its update: %+v %+v", j.Update, j.Groups[0].Update)
	}
	for _, typ := range []JobType{JobBatch, JobSysBatch} {
		if ps := mk(typ).Validate(); len(ps) == 0 || !strings.Contains(ps.Error(), "update applies to service jobs only") {
			t.Errorf("%s job with update: %v, want refused", typ, ps)
		}
	}
}
