package spec

import (
	"fmt"
	"time"
)

// JobState is a job's overall state as the user sees it.
type JobState string

const (
	// JobPending: some wanted instance is not running yet (being placed,
	// starting, or waiting for room; see the placement failures).
	JobPending JobState = "pending"
	// JobRunning: every wanted instance of a service is running.
	JobRunning JobState = "running"
	// JobComplete: every instance of a batch job exited 0.
	JobComplete JobState = "complete"
	// JobFailed: some instance failed and will not be restarted or replaced.
	JobFailed JobState = "failed"
	// JobStopped: stopped by the operator (its instances may still be
	// shutting down; see Summary).
	JobStopped JobState = "stopped"
)

// JobSummary counts a job's instances of its current version by state.
type JobSummary struct {
	State    JobState `json:"state"`
	Desired  int      `json:"desired"`
	Pending  int      `json:"pending"`
	Running  int      `json:"running"`
	Complete int      `json:"complete"`
	Failed   int      `json:"failed"`
	Lost     int      `json:"lost"`
	// Shown is Progress() in the API's answers, for the web UI, which
	// shows the counts as drover status does (SetProgress writes it).
	Shown string `json:"progress,omitempty"`
	// Reason says why the state is not the one wanted, in words, when it is
	// not obvious: "web.api[2] failed: exit code 1 after 2 restarts",
	// "1 instance of group api waiting for room: 0/1 nodes fit: ...".
	Reason string `json:"reason,omitempty"`
	// NextReplacement, when instances ended and their reschedule policy
	// replaces them, is when the first of those replacements is due (its
	// end plus the policy's delay; a lost instance's is its end: at once).
	NextReplacement *time.Time `json:"next_replacement,omitempty"`
}

// Progress is the summary's instance counts as the job list shows them,
// one place for every view: "3/3 running", "2/2 complete" (a batch job
// done), "1/2 running, 1 complete", "2/3 running, 1 failed".
func (s JobSummary) Progress() string {
	if s.Running == 0 && s.Complete > 0 {
		out := fmt.Sprintf("%d/%d complete", s.Complete, s.Desired)
		if s.Failed > 0 {
			out += fmt.Sprintf(", %d failed", s.Failed)
		}
		return out
	}
	out := fmt.Sprintf("%d/%d running", s.Running, s.Desired)
	for _, c := range []struct {
		n    int
		what string
	}{{s.Complete, "complete"}, {s.Failed, "failed"}, {s.Lost, "lost"}} {
		if c.n > 0 {
			out += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	return out
}

// SetProgress writes Shown: Progress() for the API's readers that are not
// Go (the web UI).
func (s *JobSummary) SetProgress() { s.Shown = s.Progress() }

// JobStatus is a job as `drover status JOB -o json` prints it: the job, its
// summary, why anything is pending, and its allocations. `drover run -`
// accepts it back and uses only the job.
type JobStatus struct {
	Job         *Job               `json:"job"`
	Summary     JobSummary         `json:"summary"`
	Failures    []PlacementFailure `json:"placement_failures,omitempty"`
	Allocations []*Alloc           `json:"allocations"`
	// NextLaunch is a periodic job's next tick (zero when disabled);
	// Children are the jobs launched or dispatched from it, oldest first.
	NextLaunch time.Time `json:"next_launch,omitzero"`
	Children   []string  `json:"children,omitempty"`
}

// DispatchRequest is the body of POST /v1/jobs/{name}/dispatch.
type DispatchRequest struct {
	Meta    map[string]string `json:"meta,omitempty"`
	Payload []byte            `json:"payload,omitempty"`
}

// JobListEntry is one row of `drover status` without a job name.
type JobListEntry struct {
	Name        string     `json:"name"`
	Namespace   string     `json:"namespace"`
	Type        JobType    `json:"type"`
	Priority    int        `json:"priority"`
	Version     uint64     `json:"version"`
	Stopped     bool       `json:"stopped,omitempty"`
	Summary     JobSummary `json:"summary"`
	ModifyIndex int64      `json:"modify_index"`
}
