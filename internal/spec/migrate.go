package spec

import "time"

// MigrateStrategy is Nomad's migrate block (job or group): how a drain
// moves a service group's instances off the node: max_parallel at a time,
// each replacement judged healthy as a deployment's is (health_check,
// min_healthy_time, healthy_deadline) before the next moves. Without the
// block a drain goes by the group's update block (see reconcile's moves).
type MigrateStrategy struct {
	MaxParallel     *int     `json:"max_parallel,omitempty"`
	HealthCheck     string   `json:"health_check,omitempty"`
	MinHealthyTime  Duration `json:"min_healthy_time,omitempty"`
	HealthyDeadline Duration `json:"healthy_deadline,omitempty"`
}

// DefaultMigrate is Nomad's migrate block defaults.
func DefaultMigrate() *MigrateStrategy {
	return &MigrateStrategy{MaxParallel: new(1), HealthCheck: HealthChecks,
		MinHealthyTime: Duration(10 * time.Second), HealthyDeadline: Duration(5 * time.Minute)}
}

// withDefaults returns m's fields where m sets them, else parent's.
func (m *MigrateStrategy) withDefaults(parent *MigrateStrategy) *MigrateStrategy {
	var out MigrateStrategy
	if m != nil {
		out = *m
	}
	if parent == nil {
		return &out
	}
	if out.MaxParallel == nil {
		out.MaxParallel = parent.MaxParallel
	}
	if out.HealthCheck == "" {
		out.HealthCheck = parent.HealthCheck
	}
	if out.MinHealthyTime == 0 {
		out.MinHealthyTime = parent.MinHealthyTime
	}
	if out.HealthyDeadline == 0 {
		out.HealthyDeadline = parent.HealthyDeadline
	}
	return &out
}

// MigrateOf is group g's migrate strategy as an update strategy for its
// drain moves (the group's block over the job's over Nomad's defaults),
// nil when neither writes one or the job is not a service.
func (j *Job) MigrateOf(g *Group) *UpdateStrategy {
	if j.Type != JobService || (g.Migrate == nil && j.Migrate == nil) {
		return nil
	}
	m := g.Migrate.withDefaults(j.Migrate.withDefaults(DefaultMigrate()))
	u := DefaultUpdate()
	u.MaxParallel, u.HealthCheck, u.MinHealthyTime, u.HealthyDeadline = m.MaxParallel, m.HealthCheck, m.MinHealthyTime, m.HealthyDeadline
	return u
}

func (m *MigrateStrategy) validate(ps *Problems, path string, jt JobType) {
	if m == nil {
		return
	}
	if jt != JobService {
		ps.Add(path, "migrate applies to service jobs only: a drain stops a %s job's instances without moving them one by one; remove the block", jt)
		return
	}
	if m.MaxParallel != nil && (*m.MaxParallel < 1 || *m.MaxParallel > MaxCount) {
		ps.Add(path+".max_parallel", "max_parallel %d is out of range; use 1 to %d", *m.MaxParallel, MaxCount)
	}
	validateHealth(ps, path, m.HealthCheck, namedDuration{"min_healthy_time", m.MinHealthyTime}, namedDuration{"healthy_deadline", m.HealthyDeadline})
	if full := m.withDefaults(DefaultMigrate()); full.MinHealthyTime >= full.HealthyDeadline {
		ps.Add(path+".healthy_deadline", "healthy_deadline (%s) must be longer than min_healthy_time (%s)",
			full.HealthyDeadline.Short(), full.MinHealthyTime.Short())
	}
}
