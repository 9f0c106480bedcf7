package spec

import (
	"encoding/json"
	"testing"
)

// An alloc's record says whether it was evicted by its cause; one written
// before causes existed, by its own flag.
func TestEvictedReadsTheCauseThenAnOlderRecordsFlag(t *testing.T) {
	for _, tt := range []struct {
		stored string
		want   bool
	}{
		{`{"desired_status":"stop","desired_cause":"preempted","desired_reason":"preempted by db.main[0] (priority 80 > 50)"}`, true},
		{`{"desired_status":"stop","desired_cause":"displaced","desired_reason":"verdrängt"}`, true},
		{`{"desired_status":"stop","desired_cause":"node-down","desired_reason":"preempted by db.main[0] (priority 80 > 50)"}`, false},
		{`{"desired_status":"stop","desired_reason":"preempted by db.main[0] (priority 80 > 50)","evicted":true}`, true},
		{`{"desired_status":"stop","desired_reason":"preempted by db.main[0] (priority 80 > 50)"}`, false},
	} {
		var a Alloc
		if err := json.Unmarshal([]byte(tt.stored), &a); err != nil {
			t.Fatal(err)
		}
		if got := a.Evicted(); got != tt.want {
			t.Errorf("%s: Evicted() = %v, want %v", tt.stored, got, tt.want)
		}
	}
}
