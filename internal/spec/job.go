package spec

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// JobType says how a job's instances are kept.
type JobType string

const (
	// JobService instances run until stopped; they are restarted when they exit.
	JobService JobType = "service"
	// JobBatch instances run to completion; an exit with status 0 is done.
	JobBatch JobType = "batch"
	// JobSystem runs one instance of each group on every eligible ready
	// node: every node that has the drivers and meets the constraints,
	// including nodes that join later.
	JobSystem JobType = "system"
	// JobSysBatch runs one instance of each group to completion on every
	// eligible ready node, nodes that join later included: system
	// placement, batch completion (an exit with status 0 is done).
	JobSysBatch JobType = "sysbatch"
)

// PerNode reports whether the job runs one instance of each group on every
// eligible node (system and sysbatch) rather than count instances.
func (t JobType) PerNode() bool { return t == JobSystem || t == JobSysBatch }

// Completes reports whether the job's instances run to completion (batch
// and sysbatch): a task's exit with status 0 is done, never restarted.
func (t JobType) Completes() bool { return t == JobBatch || t == JobSysBatch }

// Defaults applied by Canonicalize where a job file leaves a field out.
const (
	DefaultPriority    = 50
	MinPriority        = 1
	MaxPriority        = 100
	DefaultCount       = 1
	MaxCount           = 10000
	DefaultCPU         = 100 // MHz, as Nomad
	DefaultMemoryMB    = 300 // MB, as Nomad
	DefaultKillTimeout = Duration(5 * time.Second)
)

// DefaultNamespace is where a job that names no namespace lives.
const DefaultNamespace = "default"

// NamespaceOf returns ns, or DefaultNamespace for "" (records written
// before namespaces existed).
func NamespaceOf(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// Job is what an operator declares: a named set of groups to keep running
// (service) or to run to completion (batch).
type Job struct {
	Name string `json:"name" hcl:",label"`
	// Namespace scopes who may see and change the job (ACL policies are
	// per namespace); "" is DefaultNamespace. Job names are unique across
	// namespaces.
	Namespace string            `json:"namespace,omitempty"`
	Type      JobType           `json:"type,omitempty"`
	Priority  int               `json:"priority,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	// Datacenters are the datacenters whose nodes may run the job, each
	// with * for any run of characters, as Nomad's; none: every one.
	Datacenters []string `json:"datacenters,omitempty"`
	// NodePool is the pool whose nodes may run the job; "" is
	// DefaultNodePool, NodePoolAll every node (Job.Admits).
	NodePool string `json:"node_pool,omitempty"`
	// Reschedule is the default reschedule policy for the job's groups; a
	// group's own policy overrides it field by field.
	Reschedule *ReschedulePolicy `json:"reschedule,omitempty"`
	// Update is the default update strategy for the job's groups; a group's
	// own overrides it field by field (deploy.go).
	Update *UpdateStrategy `json:"update,omitempty"`
	// Migrate is the default migrate strategy for the job's groups: how a
	// drain moves their instances (migrate.go).
	Migrate *MigrateStrategy `json:"migrate,omitempty"`
	// Constraints apply to every group's placement.
	Constraints []*Constraint `json:"constraints,omitempty" hcl:"constraint"`
	// Affinities and Spreads are soft preferences for every group.
	Affinities []*Affinity `json:"affinities,omitempty" hcl:"affinity"`
	Spreads    []*Spread   `json:"spreads,omitempty" hcl:"spread"`
	// Scoring ranks the feasible nodes; "" is binpack.
	Scoring Scoring `json:"scoring,omitempty"`
	// Preempt lets the job evict lower-priority instances when it does not
	// fit; unset means true for system jobs, false for others.
	Preempt *bool `json:"preempt,omitempty"`
	// Periodic and Parameterized make the job a template that runs
	// nothing itself: the leader launches a child job on a cron schedule,
	// or an operator dispatches one (kinds.go).
	Periodic      *Periodic      `json:"periodic,omitempty"`
	Parameterized *Parameterized `json:"parameterized,omitempty"`
	Groups        []*Group       `json:"groups" hcl:"group"`

	// Server-owned: set by the server, ignored on submit.

	// Version counts spec changes, starting at 1. Re-submitting an identical
	// spec does not change it.
	Version uint64 `json:"version,omitempty" hcl:"-"`
	// Stopped is true after `drover stop`; submitting the job again clears it.
	Stopped bool `json:"stopped,omitempty" hcl:"-"`
	// RestartRequested is when `drover restart` asked for every instance to
	// be replaced, a group's update block's max_parallel at a time (1
	// without one), each replacement healthy before the next; zero: never.
	// Instances created before it are replaced.
	RestartRequested time.Time `json:"restart_requested,omitzero" hcl:"-"`
	// StopAllocs are the instances an operator asked to stop (`drover
	// alloc stop`): each is stopped at once and replaced. An entry whose
	// alloc is gone is dropped by the next request.
	StopAllocs []AllocStopRequest `json:"stop_allocs,omitempty" hcl:"-"`
	// SubmitTime is when the current version was submitted.
	SubmitTime time.Time `json:"submit_time,omitzero" hcl:"-"`
	// ParentID is the periodic or parameterized job this one was
	// launched from; "" for a job submitted as itself.
	ParentID string `json:"parent_id,omitempty" hcl:"-"`
	// LaunchTime is the cron tick a periodic child was launched for, or
	// when it was forced or dispatched.
	LaunchTime time.Time `json:"launch_time,omitzero" hcl:"-"`
	// Payload is a dispatched child's payload, written to each task's
	// local/ directory as its dispatch_payload's file.
	Payload []byte `json:"payload,omitempty" hcl:"-"`
	// ModifyIndex is the registry revision of the last write to the job; pass
	// it back as a check index to refuse a submit that would overwrite a
	// change you have not seen.
	ModifyIndex int64 `json:"modify_index,omitempty" hcl:"-"`
}

// Group is a set of tasks placed together on one node; Count copies of it run.
type Group struct {
	Name  string `json:"name" hcl:",label"`
	Count int    `json:"count"`
	// Restart is the default restart policy for the group's tasks.
	Restart *RestartPolicy `json:"restart,omitempty"`
	// Reschedule says when a failed instance is replaced, on a node of the
	// scheduler's choosing. After Canonicalize it is always set, every field
	// filled from the job's policy and the job type's defaults.
	Reschedule *ReschedulePolicy `json:"reschedule,omitempty"`
	// Disconnect makes the group's instances singletons across a
	// partition: see DisconnectPolicy.
	Disconnect *DisconnectPolicy `json:"disconnect,omitempty"`
	// StopAfterClientDisconnect is Nomad's older place for
	// disconnect.stop_after: Canonicalize moves it there (disconnect.go).
	StopAfterClientDisconnect Duration `json:"stop_after_client_disconnect,omitempty"`
	// MaxRunDuration bounds how long an instance of a batch or sysbatch
	// group runs: its agent stops it that long after it began, counting
	// its prestart and poststart tasks and not its kill_timeout, without
	// running its poststop tasks; it is then complete, not failed, and not
	// rescheduled (Nomad's max_run_duration). 0: no bound.
	MaxRunDuration Duration `json:"max_run_duration,omitempty"`
	// Update says how a new version of the group rolls out: nil, none (a
	// changed instance is replaced at once); else a deployment gated on
	// health (deploy.go). After Canonicalize it is complete, or nil.
	Update *UpdateStrategy `json:"update,omitempty"`
	// Migrate says how a drain moves the group's instances, over the
	// job's (migrate.go); nil: as the update block says.
	Migrate *MigrateStrategy `json:"migrate,omitempty"`
	// Constraints limit the nodes the group's instances go to, on top of
	// the job's and its tasks' (see Job.ConstraintsOf).
	Constraints []*Constraint `json:"constraints,omitempty" hcl:"constraint"`
	Affinities  []*Affinity   `json:"affinities,omitempty" hcl:"affinity"`
	Spreads     []*Spread     `json:"spreads,omitempty" hcl:"spread"`
	// Rebalance lets the leader move the group's instances, one batch at a
	// time under its update block, when the nodes' allocated load is
	// uneven (a node joined, or others filled up); off by default.
	Rebalance bool `json:"rebalance,omitempty"`
	// Network holds the ports the group's instance reserves on its node.
	Network *Network          `json:"network,omitempty"`
	Meta    map[string]string `json:"meta,omitempty"`
	// EphemeralDisk's size is reserved on the node beside the tasks'
	// disk (taskoptions.go).
	EphemeralDisk *EphemeralDisk `json:"ephemeral_disk,omitempty"`
	// Volumes are the host volumes the group's tasks may mount
	// (volume.go): its instances go only to nodes that have them.
	Volumes []*VolumeRequest `json:"volumes,omitempty" hcl:"volume"`
	// Services written at group level, as Nomad's files do: Canonicalize
	// moves each into the task it belongs to (groupservice.go), so that a
	// canonical job has services in its tasks only.
	Services []*Service `json:"services,omitempty" hcl:"service"`
	// Scaling bounds the group's count (scaling.go).
	Scaling *Scaling `json:"scaling,omitempty"`
	Tasks   []*Task  `json:"tasks" hcl:"task"`
}

// UnmarshalJSON fills in Count's default when the field is absent, so that a
// missing count means 1 while an explicit 0 stays 0. Unknown fields are still
// refused: the strict decoder that calls this sets the same rule inside.
func (g *Group) UnmarshalJSON(b []byte) error {
	type plain Group
	p := plain{Count: DefaultCount}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*g = Group(p)
	return nil
}

// Task is one process (or, later, container) inside a group.
type Task struct {
	Name      string            `json:"name" hcl:",label"`
	Driver    string            `json:"driver"`
	Config    TaskConfig        `json:"config"`
	Env       map[string]string `json:"env,omitempty"`
	Resources Resources         `json:"resources"`
	// Restart overrides the group's restart policy for this task.
	Restart     *RestartPolicy `json:"restart,omitempty"`
	KillTimeout Duration       `json:"kill_timeout,omitempty"`
	// KillSignal is the signal that asks the task to stop, SIGKILL
	// following after kill_timeout; "" is SIGTERM (taskoptions.go).
	KillSignal string `json:"kill_signal,omitempty"`
	// ShutdownDelay is how long a task asked to stop keeps running, its
	// services already out of the catalog, before kill_signal is sent.
	ShutdownDelay Duration `json:"shutdown_delay,omitempty"`
	// Leader: when this task ends, the group's other tasks are stopped.
	Leader bool `json:"leader,omitempty"`
	// User runs the task's processes as this user (name or uid), where
	// Nomad writes it; config's user is drover's older place for it.
	User string `json:"user,omitempty"`
	// Constraints count for the task's group: the group is placed only
	// where all its tasks' constraints hold.
	Constraints []*Constraint     `json:"constraints,omitempty" hcl:"constraint"`
	Affinities  []*Affinity       `json:"affinities,omitempty" hcl:"affinity"`
	Meta        map[string]string `json:"meta,omitempty"`
	// Services register the task's instances in the service catalog, with
	// health checks (service.go).
	Services []*Service `json:"services,omitempty" hcl:"service"`
	// Lifecycle makes the task a hook of its group's main tasks: run
	// before, beside or after them (lifecycle.go); nil: a main task.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// Templates are files rendered into the task's directory before it
	// starts, and again when the service catalog changes (template.go).
	Templates []*Template `json:"templates,omitempty" hcl:"template"`
	// DispatchPayload writes a dispatched job's payload into local/.
	DispatchPayload *DispatchPayload `json:"dispatch_payload,omitempty"`
	// Logs bounds the task's kept stdout and stderr files (logs.go).
	Logs *LogConfig `json:"logs,omitempty"`
	// Artifacts are fetched into the task's directory before its first
	// start, before its templates render (artifact.go).
	Artifacts []*Artifact `json:"artifacts,omitempty" hcl:"artifact"`
	// VolumeMounts mount the group's volumes into the task (volume.go).
	VolumeMounts []*VolumeMount `json:"volume_mounts,omitempty" hcl:"volume_mount"`
}

// TaskConfig is what the driver runs. For exec and raw_exec: a command and
// its arguments, run without a shell. For docker: an image, and Command and
// Args when they replace the image's own (Nomad's docker config names).
type TaskConfig struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// WorkDir is the directory the command starts in; "" is the task's
	// directory in the alloc.
	WorkDir string `json:"work_dir,omitempty"`
	// User runs the command as this user (name or uid); "" is the agent's.
	User string `json:"user,omitempty"`
	// Prestart commands run one after another before Command, each to
	// completion; one that fails fails the start (systemd's ExecStartPre).
	Prestart []Command `json:"prestart,omitempty"`
	// Stop, when set, runs before the task is signalled to stop (systemd's
	// ExecStop); the signal follows when it ends or after kill_timeout.
	Stop *Command `json:"stop,omitempty"`
	// Poststop commands run one after another once the task's process has
	// ended, however it ended, or its start failed (systemd's ExecStopPost),
	// each for at most kill_timeout; a failure is reported, nothing more.
	Poststop []Command `json:"poststop,omitempty"`

	// The docker driver's fields, named as in Nomad's docker config. Image
	// is required by docker and refused by the other drivers.
	Image string `json:"image,omitempty"`
	// Entrypoint replaces the image's entrypoint; Command and Args, when
	// set, replace its command.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Ports are labels of the group's network ports to map into the
	// container: host port Value to container port To (or Value).
	Ports []string `json:"ports,omitempty"`
	// Labels are added to the container's; drover's own (drover.*) are
	// reserved.
	Labels map[string]string `json:"labels,omitempty"`
	// Privileged, NetworkMode "host", PidMode "host" and Volumes (bind
	// mounts "host_path:container_path[:ro]") reach past the container;
	// an agent refuses them unless its configuration allows each.
	Privileged  bool     `json:"privileged,omitempty"`
	NetworkMode string   `json:"network_mode,omitempty"`
	PidMode     string   `json:"pid_mode,omitempty"`
	Volumes     []string `json:"volumes,omitempty"`
	// PortMap is Nomad's older form of Ports: each port label of the
	// group's network it names is mapped into the container, at the
	// container port given here (over the port's to).
	PortMap map[string]string `json:"port_map,omitempty"`
	// Mounts are Nomad's mount blocks (dockermount.go).
	Mounts []*DockerMount `json:"mounts,omitempty" hcl:"mount"`
	// CapAdd and CapDrop change the container's capabilities (docker's
	// names, with or without CAP_, or "ALL"); adding one outside docker's
	// default set needs an agent that allows privileged containers.
	CapAdd  []string `json:"cap_add,omitempty"`
	CapDrop []string `json:"cap_drop,omitempty"`
	// Ulimit sets resource limits by name: nofile = "1024" or "1024:2048"
	// (soft:hard).
	Ulimit map[string]string `json:"ulimit,omitempty"`
	// Sysctl sets the container's namespaced kernel parameters.
	Sysctl map[string]string `json:"sysctl,omitempty"`
	// ForcePull pulls the image at every start, even when the node has
	// it; ImagePullTimeout bounds a pull (DefaultImagePullTimeout when 0).
	ForcePull        bool     `json:"force_pull,omitempty"`
	ImagePullTimeout Duration `json:"image_pull_timeout,omitempty"`
	// Hostname is the container's host name; DNSServers,
	// DNSSearchDomains and DNSOptions its /etc/resolv.conf (the node's
	// when none is given); ExtraHosts lines added to its /etc/hosts, each
	// "name:address".
	Hostname         string   `json:"hostname,omitempty"`
	DNSServers       []string `json:"dns_servers,omitempty"`
	DNSSearchDomains []string `json:"dns_search_domains,omitempty"`
	DNSOptions       []string `json:"dns_options,omitempty"`
	ExtraHosts       []string `json:"extra_hosts,omitempty"`
	// Init runs docker's init (the daemon's docker-init) as the
	// container's first process: it reaps the task's orphans and passes
	// signals on. ReadonlyRootfs mounts the image's file system read-only;
	// ShmSize is the size of /dev/shm in bytes (docker's 64 MB when 0).
	Init           bool  `json:"init,omitempty"`
	ReadonlyRootfs bool  `json:"readonly_rootfs,omitempty"`
	ShmSize        int64 `json:"shm_size,omitempty"`
}

// Command is a program and its arguments, run without a shell.
type Command struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
}

// Resources are what a task reserves on its node. CPU is in MHz (shares of
// the node's total cycles), memory in MB, as in Nomad job files.
type Resources struct {
	CPU      int `json:"cpu"`
	MemoryMB int `json:"memory"`
	// DiskMB is scratch space in the alloc directory, in MB; a node offers
	// the free space of its data directory's file system.
	DiskMB int `json:"disk,omitempty"`
	// MemoryMaxMB, when set, is the task's hard memory limit, above the
	// MemoryMB it reserves (which becomes a soft limit); Nomad's
	// memory_max. It is not reserved on the node. MemoryMaxUnlimited (-1)
	// sets no hard limit at all: MemoryMB is reserved and the soft limit.
	MemoryMaxMB int `json:"memory_max,omitempty"`
}

// MemoryMaxUnlimited is memory_max = -1, Nomad's "no hard memory limit":
// the task reserves its memory, which is its soft limit, and may use any
// memory its node has beyond it.
const MemoryMaxUnlimited = -1

// MemoryUnlimited reports whether the task has no hard memory limit
// (memory_max = -1).
func (r Resources) MemoryUnlimited() bool {
	return r.MemoryMaxMB == MemoryMaxUnlimited
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{CPU: r.CPU + o.CPU, MemoryMB: r.MemoryMB + o.MemoryMB, DiskMB: r.DiskMB + o.DiskMB}
}

// MemoryLimitMB is the task's hard memory limit: memory_max when set,
// else memory; 0 when there is none (memory_max = -1).
func (r Resources) MemoryLimitMB() int {
	if r.MemoryUnlimited() {
		return 0
	}
	return max(r.MemoryMB, r.MemoryMaxMB)
}

// MemorySoftLimitMB is the memory the kernel reclaims a task down to under
// pressure: what it reserves, when its hard limit is above that
// (memory_max, or none at all); 0 when the hard limit is memory itself.
func (r Resources) MemorySoftLimitMB() int {
	if r.MemoryUnlimited() || r.MemoryMaxMB > r.MemoryMB {
		return r.MemoryMB
	}
	return 0
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{CPU: r.CPU - o.CPU, MemoryMB: r.MemoryMB - o.MemoryMB, DiskMB: r.DiskMB - o.DiskMB}
}

// Fits reports whether need fits into r in every dimension.
func (r Resources) Fits(need Resources) bool {
	return need.CPU <= r.CPU && need.MemoryMB <= r.MemoryMB && need.DiskMB <= r.DiskMB
}

// RestartMode says what happens when a task has used up its restart attempts
// within the interval.
type RestartMode string

const (
	// RestartFail marks the task, and so its allocation, failed.
	RestartFail RestartMode = "fail"
	// RestartDelay waits until the interval is over and starts counting again.
	RestartDelay RestartMode = "delay"
)

// RestartPolicy is how the agent restarts a task that exits on its own node.
// At most Attempts restarts happen within any Interval, each after Delay.
//
// Attempts is a pointer so that a policy can leave it unset and inherit it
// (attempts = 0 means no restarts); a zero Interval or Delay and an empty
// Mode are unset too. WithDefaults fills what is unset, and after
// Job.Canonicalize every task's policy is complete.
type RestartPolicy struct {
	Attempts *int        `json:"attempts,omitempty"`
	Interval Duration    `json:"interval"`
	Delay    Duration    `json:"delay"`
	Mode     RestartMode `json:"mode"`
}

// DefaultRestart returns Nomad's defaults for the job type: services and
// system jobs retry 2 times in 30 minutes, batch jobs 3 times in a day,
// 15 s apart, then fail; sysbatch jobs as batch ones.
func DefaultRestart(t JobType) *RestartPolicy {
	if t.Completes() {
		return &RestartPolicy{Attempts: ptr(3), Interval: Duration(24 * time.Hour), Delay: Duration(15 * time.Second), Mode: RestartFail}
	}
	return &RestartPolicy{Attempts: ptr(2), Interval: Duration(30 * time.Minute), Delay: Duration(15 * time.Second), Mode: RestartFail}
}

// WithDefaults returns a new policy: p's fields where p sets them, else
// parent's. Either may be nil.
func (p *RestartPolicy) WithDefaults(parent *RestartPolicy) *RestartPolicy {
	var out RestartPolicy
	if p != nil {
		out = *p
	}
	if parent == nil {
		parent = &RestartPolicy{}
	}
	if out.Attempts == nil && parent.Attempts != nil {
		out.Attempts = ptr(*parent.Attempts)
	} else if out.Attempts != nil {
		out.Attempts = ptr(*out.Attempts)
	}
	if out.Interval == 0 {
		out.Interval = parent.Interval
	}
	if out.Delay == 0 {
		out.Delay = parent.Delay
	}
	if out.Mode == "" {
		out.Mode = parent.Mode
	}
	return &out
}

// Allowed is how many restarts the policy allows within its interval; an
// unset Attempts reads as 0.
func (p *RestartPolicy) Allowed() int {
	if p == nil || p.Attempts == nil {
		return 0
	}
	return *p.Attempts
}

// DelayFunction says how the wait before a replacement grows with each
// failure of an instance.
type DelayFunction string

const (
	// DelayConstant waits Delay before every replacement.
	DelayConstant DelayFunction = "constant"
	// DelayExponential waits Delay * 2^(k-1) before the k-th replacement,
	// at most MaxDelay.
	DelayExponential DelayFunction = "exponential"
)

// ReschedulePolicy is when the server replaces an instance that failed (its
// tasks used up their restart policy, or it ended on its own): at most
// Attempts replacements within any Interval, unless Unlimited, each after a
// delay from DelayFunction, Delay and MaxDelay. A replacement prefers a node
// other than the failed one. An instance lost with its node is replaced at
// once and does not count: that failure is not the program's.
//
// Attempts and Unlimited are pointers so that a policy can leave them unset
// and inherit them; a zero Interval, Delay or MaxDelay, and an empty
// DelayFunction, are unset too. WithDefaults fills what is unset, and after
// Job.Canonicalize every group's policy is complete.
type ReschedulePolicy struct {
	Attempts      *int          `json:"attempts,omitempty"`
	Interval      Duration      `json:"interval"`
	Delay         Duration      `json:"delay"`
	DelayFunction DelayFunction `json:"delay_function,omitempty"`
	MaxDelay      Duration      `json:"max_delay"`
	Unlimited     *bool         `json:"unlimited,omitempty"`
}

// DefaultReschedule returns Nomad's defaults for the job type. Services are
// replaced without limit, 30 s after the first failure, doubling up to 1 h.
// Batch instances are replaced once within 24 h, 5 s after the failure.
func DefaultReschedule(t JobType) *ReschedulePolicy {
	if t.Completes() {
		return &ReschedulePolicy{Attempts: ptr(1), Interval: Duration(24 * time.Hour), Delay: Duration(5 * time.Second),
			DelayFunction: DelayConstant, MaxDelay: Duration(time.Hour), Unlimited: ptr(false)}
	}
	return &ReschedulePolicy{Attempts: ptr(0), Interval: 0, Delay: Duration(30 * time.Second),
		DelayFunction: DelayExponential, MaxDelay: Duration(time.Hour), Unlimited: ptr(true)}
}

func ptr[T any](v T) *T { return &v }

// WithDefaults returns a new policy: p's fields where p sets them, else
// parent's. Writing attempts without unlimited means a limit: Unlimited
// becomes false rather than the parent's. Either may be nil.
func (p *ReschedulePolicy) WithDefaults(parent *ReschedulePolicy) *ReschedulePolicy {
	var out ReschedulePolicy
	if p != nil {
		out = *p
	}
	if parent == nil {
		parent = &ReschedulePolicy{}
	}
	if out.Unlimited == nil && out.Attempts != nil {
		out.Unlimited = ptr(false)
	}
	if out.Attempts == nil && parent.Attempts != nil {
		out.Attempts = ptr(*parent.Attempts)
	}
	if out.Unlimited == nil && parent.Unlimited != nil {
		out.Unlimited = ptr(*parent.Unlimited)
	}
	if out.Interval == 0 {
		out.Interval = parent.Interval
	}
	if out.Delay == 0 {
		out.Delay = parent.Delay
	}
	if out.DelayFunction == "" {
		out.DelayFunction = parent.DelayFunction
	}
	if out.MaxDelay == 0 {
		out.MaxDelay = parent.MaxDelay
	}
	return &out
}

// Limit returns the policy's attempts and whether it is unlimited; unset
// fields read as 0 and false.
func (p *ReschedulePolicy) Limit() (attempts int, unlimited bool) {
	if p == nil {
		return 0, false
	}
	if p.Attempts != nil {
		attempts = *p.Attempts
	}
	return attempts, p.Unlimited != nil && *p.Unlimited
}

// ReschedulePolicyOf returns the complete policy for group g of j: g's own,
// then the job's, then the job type's defaults, field by field. It is what
// Canonicalize stores in g.Reschedule, and what the reconciler reads, so
// that it also holds for a job that was not canonicalized.
func (j *Job) ReschedulePolicyOf(g *Group) *ReschedulePolicy {
	return g.Reschedule.WithDefaults(j.Reschedule.WithDefaults(DefaultReschedule(j.Type)))
}

// Short formats d without trailing zero units: "1h", "1h30m", "90s" reads
// "1m30s".
func (d Duration) Short() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Canonicalize fills in defaults so that two specs that mean the same thing
// compare equal: type, priority, resources, kill timeout, each group's and
// each task's restart policy (task's own, else the group's, else the job
// type's default, field by field), each group's reschedule policy (group's own, else the job's,
// else the job type's default, field by field), and each check's name,
// interval, timeout, path and check_restart grace (validate_service.go),
// and a network's mode "host" as unset.
// It does not validate; call Validate after it.
func (j *Job) Canonicalize() {
	if j.Namespace == "" {
		j.Namespace = DefaultNamespace
	}
	if j.Type == "" {
		j.Type = JobService
	}
	if j.Priority == 0 {
		j.Priority = DefaultPriority
	}
	if j.Reschedule != nil {
		j.Reschedule = j.Reschedule.WithDefaults(DefaultReschedule(j.Type))
	}
	switch {
	case j.Type == JobSystem:
		// Nomad's files give system jobs an update block (max_parallel,
		// stagger); drover replaces a system job's changed instances on
		// every node at once, so the block is accepted and dropped (the
		// decoders warn of it).
		j.Update = nil
	case j.Update != nil:
		j.Update = j.Update.WithDefaults(DefaultUpdate())
	}
	if j.Type == JobService && j.Migrate != nil {
		j.Migrate = j.Migrate.withDefaults(DefaultMigrate())
	}
	defaultOperators(j.Constraints)
	for _, g := range j.Groups {
		if g == nil {
			continue
		}
		g.MoveServices()
		canonicalizeScaling(g)
		canonicalizeDisconnect(g)
		if j.Type == JobService && (g.Migrate != nil || j.Migrate != nil) {
			g.Migrate = g.Migrate.withDefaults(j.Migrate.withDefaults(DefaultMigrate()))
		}
		if g.Network != nil && g.Network.Mode == NetworkHost {
			g.Network.Mode = "" // the default, written out
		}
		if g.Network != nil {
			for i := range g.Network.Ports {
				// Nomad's to = -1 is its unset to: the port inside is
				// the host port's number.
				if g.Network.Ports[i].To == -1 {
					g.Network.Ports[i].To = 0
				}
			}
		}
		g.Reschedule = j.ReschedulePolicyOf(g)
		if g.Restart != nil {
			g.Restart = g.Restart.WithDefaults(DefaultRestart(j.Type))
		}
		switch j.Type {
		case JobService:
			g.Update = j.UpdateOf(g)
		case JobSystem:
			g.Update = nil // as the job's, above
		} // else Validate refuses a group's update block
		defaultOperators(g.Constraints)
		for _, t := range g.Tasks {
			if t == nil {
				continue
			}
			defaultOperators(t.Constraints)
			if t.Resources.CPU == 0 {
				t.Resources.CPU = DefaultCPU
			}
			if t.Resources.MemoryMB == 0 {
				t.Resources.MemoryMB = DefaultMemoryMB
			}
			if t.KillTimeout == 0 {
				t.KillTimeout = DefaultKillTimeout
			}
			t.Restart = t.Restart.WithDefaults(g.Restart.WithDefaults(DefaultRestart(j.Type)))
			canonicalizeServices(t)
		}
	}
}

// AllocStopRequest is one instance an operator asked to stop, and when.
type AllocStopRequest struct {
	Alloc string    `json:"alloc" hcl:"-"`
	Time  time.Time `json:"time" hcl:"-"`
}

// StopRequested is when an operator asked for alloc id to stop (zero:
// never).
func (j *Job) StopRequested(id string) time.Time {
	for _, s := range j.StopAllocs {
		if s.Alloc == id {
			return s.Time
		}
	}
	return time.Time{}
}

// SpecOnly returns a copy of j without the server-owned fields, the part an
// operator wrote. Two submissions change nothing when their SpecOnly copies
// are equal.
func (j *Job) SpecOnly() *Job {
	c := j.Clone()
	c.Version, c.Stopped, c.SubmitTime, c.ModifyIndex, c.RestartRequested, c.StopAllocs = 0, false, time.Time{}, 0, time.Time{}, nil
	return c
}

// Clone returns a deep copy of j.
func (j *Job) Clone() *Job {
	b, err := json.Marshal(j)
	if err != nil {
		panic("spec: job does not marshal: " + err.Error())
	}
	var c Job
	if err := json.Unmarshal(b, &c); err != nil {
		panic("spec: job does not unmarshal: " + err.Error())
	}
	return &c
}

// Group returns the group with the given name, or nil.
func (j *Job) Group(name string) *Group {
	for _, g := range j.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// Resources returns what one instance of the group reserves: the sum of its
// tasks' resources.
func (g *Group) Resources() Resources {
	var r Resources
	for _, t := range g.Tasks {
		r = r.Add(t.Resources)
	}
	if g.EphemeralDisk != nil {
		r.DiskMB += g.EphemeralDisk.SizeMB
	}
	return r
}

// Drivers returns the drivers the group's tasks need, sorted, without repeats.
func (g *Group) Drivers() []string {
	var out []string
	for _, t := range g.Tasks {
		dup := false
		for _, d := range out {
			dup = dup || d == t.Driver
		}
		if !dup {
			out = append(out, t.Driver)
		}
	}
	sortStrings(out)
	return out
}

// Task returns the task with the given name, or nil.
func (g *Group) Task(name string) *Task {
	for _, t := range g.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// DisconnectPolicy keeps at most one copy of an instance running when its
// node is cut off from the servers (Nomad's stop_on_client_after). The
// cut-off agent stops the instance once it has had no contact with any
// server for StopAfter; the leader places a replacement only after it has
// seen the node down for StopAfter plus the tasks' kill_timeout plus a
// margin, and a node is only down a node TTL after its last heartbeat. So
// the old copy is gone before the new one starts, at the price of the
// instance being away for about TTL + StopAfter + kill_timeout.
type DisconnectPolicy struct {
	StopAfter Duration `json:"stop_after"`
	// StopOnClientAfter is Nomad's name for StopAfter, as its job files
	// write it: Canonicalize moves it into StopAfter (disconnect.go).
	StopOnClientAfter Duration `json:"stop_on_client_after,omitempty"`
}

// MaxStopAfter bounds disconnect.stop_after: beyond an hour a replacement
// would wait so long that the job is better stopped by hand.
const MaxStopAfter = Duration(time.Hour)

// defaultOperators writes "=" where a constraint leaves its operator out.
func defaultOperators(cs []*Constraint) {
	for _, c := range cs {
		if c != nil && c.Operator == "" {
			c.Operator = OpEqual
		}
	}
}
