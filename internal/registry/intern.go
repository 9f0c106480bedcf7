package registry

import "github.com/drover-org/drover/internal/spec"

// interner holds one copy of each string the decoded values repeat (a
// job's name in each of its allocs and events, a node's ID in each alloc
// on it, a status), so that the server's store holds it once, not once
// per value. It belongs to the mirror, which decodes on one goroutine.
// Past maxInterned strings it starts afresh (the values keep theirs), so
// that the names of jobs and nodes long gone are not kept forever.
type interner map[string]string

const maxInterned = 1 << 16

func intern[S ~string](in *interner, s S) S {
	if s == "" {
		return s
	}
	if v, ok := (*in)[string(s)]; ok {
		return S(v)
	}
	if *in == nil || len(*in) >= maxInterned {
		*in = interner{}
	}
	(*in)[string(s)] = string(s)
	return s
}

// alloc interns an alloc's repeated strings: those of its job, group,
// node and desired state; not its ID, name or reason, which are mostly
// its own.
func (in *interner) alloc(a *spec.Alloc) {
	a.Job, a.Namespace, a.Group, a.JobType = intern(in, a.Job), intern(in, a.Namespace), intern(in, a.Group), intern(in, a.JobType)
	a.NodeID, a.NodeName, a.DeploymentID = intern(in, a.NodeID), intern(in, a.NodeName), intern(in, a.DeploymentID)
	a.DesiredStatus, a.DesiredCause = intern(in, a.DesiredStatus), intern(in, a.DesiredCause)
}

// status interns the strings an agent's status repeats across its
// allocs: the status, its description, and its tasks' states.
func (in *interner) status(st *spec.AllocStatus) {
	st.ClientStatus, st.Description, st.Health = intern(in, st.ClientStatus), intern(in, st.Description), intern(in, st.Health)
	for _, ts := range st.Tasks {
		ts.State = intern(in, ts.State)
	}
}

// events interns the strings events repeat: topics, types, and the
// names of jobs, nodes, tasks and deployments.
func (in *interner) events(evs []spec.Event) {
	for i := range evs {
		e := &evs[i]
		e.Topic, e.Type, e.Job, e.Namespace, e.Node = intern(in, e.Topic), intern(in, e.Type), intern(in, e.Job), intern(in, e.Namespace), intern(in, e.Node)
		e.Task, e.DeploymentID = intern(in, e.Task), intern(in, e.DeploymentID)
	}
}
