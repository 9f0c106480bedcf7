package server

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestDispatched: a dispatch's child carries the meta over the job's and
// the payload; a dispatch that breaks the parameterized block is refused
// saying what to pass.
func TestDispatched(t *testing.T) {
	job := &spec.Job{Name: "enc", Type: spec.JobBatch, Meta: map[string]string{"team": "a", "input": "default"},
		Parameterized: &spec.Parameterized{Payload: spec.PayloadRequired, MetaRequired: []string{"input"}, MetaOptional: []string{"preset"}}}
	now := time.Unix(1700000000, 0)
	c, msg := Dispatched(job, spec.DispatchRequest{Meta: map[string]string{"input": "a.mp4"}, Payload: []byte("{}")}, now, "0badf00d")
	if msg != "" {
		t.Fatal(msg)
	}
	if c.Name != "enc@dispatch-1700000000-0badf00d" || c.ParentID != "enc" || c.Parameterized != nil || string(c.Payload) != "{}" ||
		c.Meta["input"] != "a.mp4" || c.Meta["team"] != "a" || job.Meta["input"] != "default" {
		t.Errorf("child %+v; want enc@dispatch-1700000000-0badf00d, parent enc, meta merged, the job's own meta untouched", c)
	}
	for _, tc := range []struct {
		req  spec.DispatchRequest
		want string
	}{
		{spec.DispatchRequest{Payload: []byte("x")}, `requires meta ["input"]`},
		{spec.DispatchRequest{Meta: map[string]string{"input": "a"}}, "requires a payload"},
		{spec.DispatchRequest{Meta: map[string]string{"input": "a", "colour": "red"}, Payload: []byte("x")}, `takes no meta "colour"`},
		{spec.DispatchRequest{Meta: map[string]string{"input": "a"}, Payload: make([]byte, spec.MaxPayload+1)}, "the limit is 16384"},
	} {
		if _, msg := Dispatched(job, tc.req, now, "x"); !strings.Contains(msg, tc.want) {
			t.Errorf("%+v: got %q; want it to say %q", tc.req.Meta, msg, tc.want)
		}
	}
	forbid := &spec.Job{Name: "f", Parameterized: &spec.Parameterized{Payload: spec.PayloadForbidden}}
	if _, msg := Dispatched(forbid, spec.DispatchRequest{Payload: []byte("x")}, now, "x"); !strings.Contains(msg, "takes no payload") {
		t.Errorf("a payload to a job that forbids one: %q", msg)
	}
}
