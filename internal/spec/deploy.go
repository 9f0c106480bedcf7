package spec

import (
	"fmt"
	"time"
)

// UpdateStrategy is a group's `update` block: how a new version of the job
// replaces the group's instances. Each deployment replaces at most
// MaxParallel instances at a time and waits for each replacement to be
// healthy (its checks passing, or with HealthCheck "task_states" its tasks
// running, for MinHealthyTime without a restart) before it replaces more.
// A replacement not healthy within HealthyDeadline of its start is
// unhealthy. An unhealthy replacement is replaced in turn, as the group's
// reschedule policy says, and the deployment fails only when none of its
// instances became healthy for ProgressDeadline (or the policy allows no
// more replacements); with ProgressDeadline 0, written out, the first
// unhealthy instance fails it. With Canary > 0 the new version first runs on
// Canary extra instances beside the old ones, and replaces the rest only
// once promoted (by `drover deployment promote`, or by AutoPromote when
// every canary is healthy). A failed deployment replaces nothing more; with
// AutoRevert the job goes back to its newest version whose deployment
// succeeded.
//
// Changes that need no restart (count, for example) change no instance and
// so wait for nothing. Pointers and zero durations are unset, and inherit:
// a group's strategy from the job's, then from DefaultUpdate.
type UpdateStrategy struct {
	MaxParallel     *int     `json:"max_parallel,omitempty"`
	HealthCheck     string   `json:"health_check,omitempty"`
	MinHealthyTime  Duration `json:"min_healthy_time,omitempty"`
	HealthyDeadline Duration `json:"healthy_deadline,omitempty"`
	// ProgressDeadline is a pointer so that a written 0 (no deadline: the
	// first unhealthy instance fails the deployment) differs from unset.
	ProgressDeadline *Duration `json:"progress_deadline,omitempty"`
	AutoRevert       *bool     `json:"auto_revert,omitempty"`
	Canary           *int      `json:"canary,omitempty"`
	AutoPromote      *bool     `json:"auto_promote,omitempty"`
}

// Health check modes of an update strategy.
const (
	// HealthChecks: healthy when every task runs and every check passes.
	HealthChecks = "checks"
	// HealthTaskStates: healthy when every task runs; checks are ignored.
	HealthTaskStates = "task_states"
)

// DefaultUpdate is Nomad's update block defaults.
func DefaultUpdate() *UpdateStrategy {
	return &UpdateStrategy{
		MaxParallel:      ptr(1),
		HealthCheck:      HealthChecks,
		MinHealthyTime:   Duration(10 * time.Second),
		HealthyDeadline:  Duration(5 * time.Minute),
		ProgressDeadline: ptr(Duration(10 * time.Minute)),
		AutoRevert:       ptr(false),
		Canary:           ptr(0),
		AutoPromote:      ptr(false),
	}
}

// WithDefaults returns a new strategy: u's fields where u sets them, else
// parent's. Either may be nil.
func (u *UpdateStrategy) WithDefaults(parent *UpdateStrategy) *UpdateStrategy {
	var out UpdateStrategy
	if u != nil {
		out = *u
	}
	if parent == nil {
		parent = &UpdateStrategy{}
	}
	orPtr := func(p **int, q *int) {
		if *p == nil && q != nil {
			*p = ptr(*q)
		}
	}
	orBool := func(p **bool, q *bool) {
		if *p == nil && q != nil {
			*p = ptr(*q)
		}
	}
	orPtr(&out.MaxParallel, parent.MaxParallel)
	orPtr(&out.Canary, parent.Canary)
	orBool(&out.AutoRevert, parent.AutoRevert)
	orBool(&out.AutoPromote, parent.AutoPromote)
	if out.HealthCheck == "" {
		out.HealthCheck = parent.HealthCheck
	}
	if out.MinHealthyTime == 0 {
		out.MinHealthyTime = parent.MinHealthyTime
	}
	if out.HealthyDeadline == 0 {
		out.HealthyDeadline = parent.HealthyDeadline
	}
	if out.ProgressDeadline == nil && parent.ProgressDeadline != nil {
		out.ProgressDeadline = ptr(*parent.ProgressDeadline)
	}
	return &out
}

// UpdateOf returns the complete strategy of group g of j, or nil when
// neither the group nor the job has an update block, or the job is not a
// service (batch and system jobs replace changed instances at once).
func (j *Job) UpdateOf(g *Group) *UpdateStrategy {
	if j.Type != JobService || (g.Update == nil && j.Update == nil) {
		return nil
	}
	return g.Update.WithDefaults(j.Update.WithDefaults(DefaultUpdate()))
}

// Parallel is how many instances a deployment replaces at a time; 0 means
// the strategy makes no deployment.
func (u *UpdateStrategy) Parallel() int {
	if u == nil || u.MaxParallel == nil {
		return 0
	}
	return *u.MaxParallel
}

// Canaries is the number of canaries, 0 when unset.
func (u *UpdateStrategy) Canaries() int {
	if u == nil || u.Canary == nil {
		return 0
	}
	return *u.Canary
}

// Progress is the progress deadline: 0 when written as 0, or unset.
func (u *UpdateStrategy) Progress() Duration {
	if u == nil || u.ProgressDeadline == nil {
		return 0
	}
	return *u.ProgressDeadline
}

func (u *UpdateStrategy) flag(b *bool) bool { return u != nil && b != nil && *b }

// Reverts reports whether a failed deployment reverts the job.
func (u *UpdateStrategy) Reverts() bool { return u.flag(u.AutoRevert) }

// Promotes reports whether healthy canaries are promoted without an operator.
func (u *UpdateStrategy) Promotes() bool { return u.flag(u.AutoPromote) }

func (u *UpdateStrategy) validate(ps *Problems, path string, jt JobType) {
	if jt.Completes() {
		ps.Add(path, "update applies to service jobs only; a %s job's changed instances are replaced at once", jt)
		return
	}
	if u.MaxParallel != nil && (*u.MaxParallel < 0 || *u.MaxParallel > MaxCount) {
		ps.Add(path+".max_parallel", "max_parallel %d is out of range; use 0 (no deployment) to %d", *u.MaxParallel, MaxCount)
	}
	if u.Canary != nil && (*u.Canary < 0 || *u.Canary > MaxCount) {
		ps.Add(path+".canary", "canary %d is out of range; use 0 to %d", *u.Canary, MaxCount)
	}
	validateHealth(ps, path, u.HealthCheck, namedDuration{"min_healthy_time", u.MinHealthyTime},
		namedDuration{"healthy_deadline", u.HealthyDeadline}, namedDuration{"progress_deadline", u.Progress()})
	full := u.WithDefaults(DefaultUpdate())
	if full.MinHealthyTime >= full.HealthyDeadline {
		ps.Add(path+".healthy_deadline", "healthy_deadline (%s) must be longer than min_healthy_time (%s)",
			full.HealthyDeadline.Short(), full.MinHealthyTime.Short())
	}
	if pd := full.Progress(); pd != 0 && pd < full.HealthyDeadline {
		ps.Add(path+".progress_deadline", "progress_deadline (%s) must be at least healthy_deadline (%s), or 0 to fail the deployment at its first unhealthy instance",
			pd.Short(), full.HealthyDeadline.Short())
	}
}

type namedDuration struct {
	name string
	v    Duration
}

// validateHealth checks the health settings an update and a migrate
// block share: the health_check mode and durations that are not negative.
func validateHealth(ps *Problems, path, healthCheck string, ds ...namedDuration) {
	switch healthCheck {
	case "", HealthChecks, HealthTaskStates:
	default:
		ps.Add(path+".health_check", "unknown health_check %q; use %q or %q", healthCheck, HealthChecks, HealthTaskStates)
	}
	for _, d := range ds {
		if d.v < 0 {
			ps.Add(path+"."+d.name, "%s must not be negative, got %s", d.name, d.v)
		}
	}
}

// DeploymentStatus is where a deployment is in its life. Running is the
// only state that changes; the others are final.
type DeploymentStatus string

const (
	DeploymentRunning    DeploymentStatus = "running"
	DeploymentSuccessful DeploymentStatus = "successful"
	DeploymentFailed     DeploymentStatus = "failed"
	// DeploymentCancelled: a newer version, or a stop, superseded it.
	DeploymentCancelled DeploymentStatus = "cancelled"
)

// Final reports whether the status can no longer change.
func (s DeploymentStatus) Final() bool { return s != DeploymentRunning }

// Deployment is the rollout of one version of a service job whose groups
// have an update strategy. The leader writes it; operators ask for a
// promotion or a failure through its Request, stored apart.
type Deployment struct {
	ID         string           `json:"id"`
	Job        string           `json:"job"`
	Namespace  string           `json:"namespace,omitempty"`
	JobVersion uint64           `json:"job_version"`
	Status     DeploymentStatus `json:"status"`
	// Description says why the deployment is where it is, in words:
	// "web.api[2] unhealthy: check http failing: ...; reverted to version 1".
	Description string `json:"description,omitempty"`
	// Groups is the progress per group with an update strategy.
	Groups map[string]*DeploymentGroup `json:"groups"`
	// Failure is why a failed deployment failed, as data; Description
	// says it in words. "" for one that did not fail, or one failed by a
	// server from before failures were typed.
	Failure DeploymentFailure `json:"failure,omitempty"`
	// AwaitingPromotion: every canary is healthy and the deployment
	// waits for an operator to promote it (no auto_promote), as data;
	// the description says it in words.
	AwaitingPromotion bool `json:"awaiting_promotion,omitempty"`
	// RevertTo is, for a failed deployment with auto_revert, the version
	// the job goes back to (its newest successful deployment's), or 0.
	RevertTo uint64 `json:"revert_to,omitempty"`
	// Request is what an operator asked of the deployment (promote or
	// fail), merged in on read; the leader acts on it.
	Request    *DeploymentRequest `json:"request,omitempty"`
	CreateTime time.Time          `json:"create_time"`
	ModifyTime time.Time          `json:"modify_time"`
	// ModifyIndex is the registry revision of its last write, set on read.
	ModifyIndex int64 `json:"modify_index,omitempty"`
}

// DeploymentFailure is why a deployment failed (Deployment.Failure).
type DeploymentFailure string

const (
	// FailedUnhealthy: an instance was unhealthy (its agent's verdict, or
	// it failed before one) in a group whose progress_deadline is 0.
	FailedUnhealthy DeploymentFailure = "unhealthy"
	// FailedProgressDeadline: no instance of a group became healthy within
	// its progress_deadline.
	FailedProgressDeadline DeploymentFailure = "progress-deadline"
	// FailedRescheduleExhausted: an instance was unhealthy and its group's
	// reschedule policy allows no more replacements, so the group can make
	// no more progress before its deadline.
	FailedRescheduleExhausted DeploymentFailure = "reschedule-exhausted"
	// FailedByOperator: drover deployment fail.
	FailedByOperator DeploymentFailure = "operator"
)

// DeploymentGroup is one group's progress in a deployment.
type DeploymentGroup struct {
	// Desired is the group's count; DesiredCanaries its canary count.
	Desired         int `json:"desired"`
	DesiredCanaries int `json:"desired_canaries,omitempty"`
	// PlacedCanaries are the IDs of the canaries placed.
	PlacedCanaries []string `json:"placed_canaries,omitempty"`
	Promoted       bool     `json:"promoted,omitempty"`
	AutoPromote    bool     `json:"auto_promote,omitempty"`
	AutoRevert     bool     `json:"auto_revert,omitempty"`
	// Placed counts the instances this deployment placed; Healthy and
	// Unhealthy those whose health is decided.
	Placed    int `json:"placed"`
	Healthy   int `json:"healthy"`
	Unhealthy int `json:"unhealthy"`
	// RequireProgressBy is when the deployment fails unless another of its
	// instances becomes healthy first; zero once the group is done.
	RequireProgressBy time.Time `json:"require_progress_by,omitzero"`
}

// DeploymentRequest is an operator's request about a deployment.
type DeploymentRequest struct {
	Promote bool `json:"promote,omitempty"`
	Fail    bool `json:"fail,omitempty"`
	// Paused: an operator paused the deployment (drover deployment
	// pause) and has not resumed it: the leader places no canary and
	// replaces no old instance of it meanwhile, and its progress deadline
	// does not run.
	Paused bool `json:"paused,omitempty"`
	// Resumed is when it was last resumed (drover deployment resume): its
	// progress deadline runs again from then.
	Resumed time.Time `json:"resumed,omitzero"`
	// Time is the latest request's.
	Time time.Time `json:"time"`
}

// DeploymentHealth is an agent's verdict on an alloc placed by a
// deployment, final once given (AllocStatus.DeploymentHealth).
type DeploymentHealth struct {
	Healthy bool      `json:"healthy"`
	Time    time.Time `json:"time"`
	// Reason says why it is unhealthy: "task server restarted: exit code
	// 1", "not healthy within healthy_deadline 30s: check http failing".
	Reason string `json:"reason,omitempty"`
}

// String names the deployment for logs and errors.
func (d *Deployment) String() string {
	return fmt.Sprintf("deployment %s of %s version %d: %s", ShortID(d.ID), d.Job, d.JobVersion, d.Status)
}

// ShortID is the first 8 characters of an ID, as shown to users.
func ShortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
