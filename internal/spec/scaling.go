package spec

import (
	"fmt"
	"strings"
)

// Scaling is a group's scaling block, as Nomad's: the bounds its count
// may take, which validation, every submission and `drover job scale`
// hold it to. drover has no autoscaler: enabled is kept for one that
// reads the job, and the policy block (the autoscaler's own language) is
// accepted with a warning and not kept.
type Scaling struct {
	Enabled bool `json:"enabled,omitempty"`
	// Min defaults to the group's count when the job is read; a count
	// below it is raised to it (Canonicalize).
	Min *int `json:"min,omitempty"`
	Max *int `json:"max,omitempty"`
}

// canonicalizeScaling fills min from the count, and raises a count below
// min to it: a Nomad file that gives min and no count starts min
// instances, as in Nomad (drover cannot tell a count written as 1 from
// the default 1).
func canonicalizeScaling(g *Group) {
	s := g.Scaling
	if s == nil {
		return
	}
	if s.Min == nil {
		s.Min = new(g.Count)
	}
	if *s.Min >= 0 && g.Count < *s.Min && (s.Max == nil || *s.Min <= *s.Max) {
		g.Count = *s.Min
	}
}

func validateScaling(ps *Problems, path string, jt JobType, g *Group) {
	s := g.Scaling
	if s == nil {
		return
	}
	path += ".scaling"
	if jt.PerNode() {
		ps.Add(path, "group %q: a %s job runs one instance per node and has no count to scale; remove the scaling block", g.Name, jt)
		return
	}
	if s.Max == nil {
		ps.Add(path+".max", "group %q: scaling needs max, the largest count the group may be scaled to", g.Name)
		return
	}
	if *s.Max < 0 {
		ps.Add(path+".max", "group %q: scaling max %d must not be negative", g.Name, *s.Max)
	}
	if s.Min != nil {
		if *s.Min < 0 {
			ps.Add(path+".min", "group %q: scaling min %d must not be negative", g.Name, *s.Min)
		} else if *s.Min > *s.Max {
			ps.Add(path+".min", "group %q: scaling min %d is above max %d", g.Name, *s.Min, *s.Max)
		}
	}
	if g.Count > *s.Max {
		ps.Add(path+".max", "group %q: count %d is above scaling max %d; lower count or raise max", g.Name, g.Count, *s.Max)
	}
}

// ScaleCheck says why group g of job j may not be set to count, "" when
// it may: a system job has no count, and a scaling block's bounds hold.
func ScaleCheck(j *Job, g *Group, count int) string {
	switch {
	case j.Type.PerNode():
		return fmt.Sprintf("job %q is a %s job: it runs one instance on each node that matches it and has no count to scale", j.Name, j.Type)
	case count < 0:
		return fmt.Sprintf("count must not be negative, got %d", count)
	case g.Scaling != nil && g.Scaling.Min != nil && count < *g.Scaling.Min:
		return fmt.Sprintf("count %d is below group %q's scaling min %d; change the bounds in the job file to go lower", count, g.Name, *g.Scaling.Min)
	case g.Scaling != nil && g.Scaling.Max != nil && count > *g.Scaling.Max:
		return fmt.Sprintf("count %d is above group %q's scaling max %d; change the bounds in the job file to go higher", count, g.Name, *g.Scaling.Max)
	}
	return ""
}

// ScaleTarget is the group a scale request names: the job's only group
// when name is "". The message says what to name otherwise.
func ScaleTarget(j *Job, name string) (*Group, string) {
	if name == "" {
		if len(j.Groups) == 1 {
			return j.Groups[0], ""
		}
		return nil, fmt.Sprintf("job %q has %d groups (%s); name the one to scale", j.Name, len(j.Groups), groupNames(j))
	}
	for _, g := range j.Groups {
		if g.Name == name {
			return g, ""
		}
	}
	return nil, fmt.Sprintf("job %q has no group %q; its groups are %s", j.Name, name, groupNames(j))
}

func groupNames(j *Job) string {
	var ns []string
	for _, g := range j.Groups {
		ns = append(ns, g.Name)
	}
	return strings.Join(ns, ", ")
}
