package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestRestartProgress(t *testing.T) {
	req := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	before, after := req.Add(-time.Hour), req.Add(time.Second)
	alloc := func(name string, created time.Time, desired spec.DesiredStatus, client spec.ClientStatus) *spec.Alloc {
		a := &spec.Alloc{Name: name, NodeName: "n1", CreateTime: created, DesiredStatus: desired}
		if client != "" {
			a.Status = &spec.AllocStatus{ClientStatus: client}
		}
		return a
	}
	run, stop := spec.DesiredRun, spec.DesiredStop
	failed := alloc("web.api[1]", after, run, spec.ClientFailed)
	failed.Status.Description = "exit code 1 after 2 restarts"
	for _, tc := range []struct {
		name   string
		allocs []*spec.Alloc
		want   restartProgress
		line   string
		done   bool
	}{
		{
			name: "nothing replaced yet",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", before, run, spec.ClientRunning),
				alloc("web.api[1]", before, run, spec.ClientRunning),
				alloc("web.api[2]", before, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 3, Old: 3, Running: 3},
			line: "0/3 instances replaced, 3/3 running",
		},
		{
			// The old copy is told to stop but still runs; its
			// replacement waits: neither counts as done.
			name: "one stopping, its replacement pending",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", before, stop, spec.ClientRunning),
				alloc("web.api[0]", after, run, ""),
				alloc("web.api[1]", before, run, spec.ClientRunning),
				alloc("web.api[2]", before, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 3, Old: 2, Running: 2},
			line: "1/3 instances replaced, 2/3 running",
		},
		{
			name: "two of three replaced, the old ones complete",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", before, stop, spec.ClientComplete),
				alloc("web.api[0]", after, run, spec.ClientRunning),
				alloc("web.api[1]", before, stop, spec.ClientComplete),
				alloc("web.api[1]", after, run, spec.ClientRunning),
				alloc("web.api[2]", before, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 3, Old: 1, Running: 3},
			line: "2/3 instances replaced, 3/3 running",
		},
		{
			name: "all replaced and running",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", before, stop, spec.ClientComplete),
				alloc("web.api[0]", after, run, spec.ClientRunning),
				alloc("web.api[1]", before, stop, spec.ClientComplete),
				alloc("web.api[1]", after, run, spec.ClientRunning),
				alloc("web.api[2]", before, stop, spec.ClientComplete),
				alloc("web.api[2]", after, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 3, Old: 0, Running: 3},
			line: "3/3 instances replaced, 3/3 running",
			done: true,
		},
		{
			// No old one is left, but a replacement has not started.
			name: "all replaced, one still pending",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", after, run, spec.ClientRunning),
				alloc("web.api[1]", after, run, spec.ClientPending),
			},
			want: restartProgress{Total: 2, Old: 0, Running: 1},
			line: "2/2 instances replaced, 1/2 running",
		},
		{
			// An old alloc that had already failed is not live: nothing
			// to replace, and not the restart's failure.
			name: "an old failure is neither old nor failed",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", before, run, spec.ClientFailed),
				alloc("web.api[0]", after, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 1, Old: 0, Running: 1},
			line: "1/1 instances replaced, 1/1 running",
			done: true,
		},
		{
			name: "a replacement failed",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", after, run, spec.ClientRunning),
				failed,
				alloc("web.api[2]", before, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 3, Old: 1, Running: 2, Failed: []string{"web.api[1] failed on n1: exit code 1 after 2 restarts"}},
			line: "2/3 instances replaced, 2/3 running",
		},
		{
			// More old instances live than the job wants (its count just
			// went down): none replaced, never a negative count.
			name: "more old than wanted",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", before, run, spec.ClientRunning),
				alloc("web.api[1]", before, run, spec.ClientRunning),
				alloc("web.api[2]", before, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 2, Old: 3, Running: 3},
			line: "0/2 instances replaced, 3/2 running",
		},
		{
			// An alloc created in the same instant as the request was
			// placed for it, not before it.
			name: "created at the request is new",
			allocs: []*spec.Alloc{
				alloc("web.api[0]", req, run, spec.ClientRunning),
			},
			want: restartProgress{Total: 1, Old: 0, Running: 1},
			line: "1/1 instances replaced, 1/1 running",
			done: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &spec.JobStatus{Summary: spec.JobSummary{Desired: tc.want.Total}, Allocations: tc.allocs}
			got := restartProgressOf(st, req)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}
			if s := got.String(); s != tc.line {
				t.Errorf("line %q, want %q", s, tc.line)
			}
			if got.Done() != tc.done {
				t.Errorf("done %v, want %v", got.Done(), tc.done)
			}
		})
	}
}
