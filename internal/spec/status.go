package spec

import "strconv"

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
	// Progress is "running and complete / desired", as drover status's
	// RUNNING column and the web UI show it (SetProgress writes it).
	Progress string `json:"progress,omitempty"`
	// Reason says why the state is not the one wanted, in words, when it is
	// not obvious: "web.api[2] failed: exit code 1 after 2 restarts",
	// "1 instance of group api waiting for room: 0/1 nodes fit: ...".
	Reason string `json:"reason,omitempty"`
}

// SetProgress writes Progress from the counts: the one place the
// CLI's and the UI's "2/2" comes from.
func (s *JobSummary) SetProgress() {
	s.Progress = strconv.Itoa(s.Running+s.Complete) + "/" + strconv.Itoa(s.Desired)
}

// JobStatus is a job as `drover status JOB -o json` prints it: the job, its
// summary, why anything is pending, and its allocations. `drover run -`
// accepts it back and uses only the job.
type JobStatus struct {
	Job         *Job               `json:"job"`
	Summary     JobSummary         `json:"summary"`
	Failures    []PlacementFailure `json:"placement_failures,omitempty"`
	Allocations []*Alloc           `json:"allocations"`
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
