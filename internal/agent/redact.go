package agent

import (
	"cmp"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// Task env values are the job's secrets (a database password, an API
// key): they go to the task's processes and nowhere else. A message the
// agent writes (a task event, its log line, an alloc's description, a
// deployment health reason, a script check's output) can carry one by
// accident, as a driver's error quoting the task's PATH, or a script
// echoing its command line; each is redacted before it is logged or leaves
// the node. Only the free-text fields are rewritten: an env value equal to
// a state name must not change a state.

// minRedactLen: values shorter than this are not redacted. They are ports,
// modes, "true" and "1", which would blank out the words of every message;
// a secret that short would be guessed anyway.
const minRedactLen = 8

// newRedactor returns a replacer of the env values of an alloc's tasks
// with "<env NAME>", or nil when there is nothing to redact.
func newRedactor(tasks []*spec.Task) *strings.Replacer {
	type kv struct{ k, v string }
	var vals []kv
	for _, t := range tasks {
		for k, v := range t.Env {
			if len(v) >= minRedactLen {
				vals = append(vals, kv{k, v})
			}
		}
	}
	if len(vals) == 0 {
		return nil
	}
	// Longest first: where two values match at one place, the longer one
	// wins, so no part of it is left standing.
	slices.SortFunc(vals, func(a, b kv) int {
		return cmp.Or(cmp.Compare(len(b.v), len(a.v)), strings.Compare(a.k, b.k))
	})
	pairs := make([]string, 0, 2*len(vals))
	for _, p := range vals {
		pairs = append(pairs, p.v, "<env "+p.k+">")
	}
	return strings.NewReplacer(pairs...)
}

// redact removes the alloc's task env values from s.
func (ar *allocRunner) redact(s string) string {
	if ar.redactor == nil || s == "" {
		return s
	}
	return ar.redactor.Replace(s)
}

// redactStatus redacts the free-text fields of st, a copy on its way out.
func (ar *allocRunner) redactStatus(st *spec.AllocStatus) {
	if ar.redactor == nil {
		return
	}
	st.Description = ar.redact(st.Description)
	if st.DeploymentHealth != nil {
		st.DeploymentHealth.Reason = ar.redact(st.DeploymentHealth.Reason)
	}
	for _, ts := range st.Tasks {
		for i := range ts.Events {
			ts.Events[i].Message = ar.redact(ts.Events[i].Message)
		}
		for i := range ts.Checks {
			ts.Checks[i].Output = ar.redact(ts.Checks[i].Output)
		}
	}
}
