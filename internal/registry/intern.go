package registry

import (
	"unique"

	"github.com/drover-org/drover/internal/spec"
)

// intern returns s as the one copy of its value that the process keeps
// (unique.Make), so that the strings every decoded value repeats (a
// job's name in each of its allocs and events, a node's ID in each alloc
// on it, a status) are held once, not once per value. The copy lives as
// long as some value uses it.
func intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// internAlloc interns an alloc's repeated strings: those of its job,
// group, node and desired state; not its ID, name or reason, which are
// mostly its own (a string interned once costs more than it saves).
func internAlloc(a *spec.Alloc) {
	a.Job, a.Namespace, a.Group, a.JobType = intern(a.Job), intern(a.Namespace), intern(a.Group), intern(a.JobType)
	a.NodeID, a.NodeName, a.DeploymentID = intern(a.NodeID), intern(a.NodeName), intern(a.DeploymentID)
	a.DesiredStatus, a.DesiredCause = intern(a.DesiredStatus), intern(a.DesiredCause)
}

// internStatus interns the strings an agent's status repeats across its
// allocs: the status, its description, and its tasks' states.
func internStatus(st *spec.AllocStatus) {
	st.ClientStatus, st.Description, st.Health = intern(st.ClientStatus), intern(st.Description), intern(st.Health)
	for _, ts := range st.Tasks {
		ts.State = intern(ts.State)
	}
}
