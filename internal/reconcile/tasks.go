package reconcile

import (
	"maps"
	"slices"

	"github.com/drover-org/drover/internal/spec"
)

// tasksEqual reports whether two task lists run the same thing, so that a
// new job version that changed only count, meta or priority keeps its
// running allocs (an in-place update) while any change to what a task runs
// or reserves replaces them. Constraints and affinities are not compared:
// like the job's and the group's, a task's constraints decide where new instances go, and
// a change to them leaves running instances where they are.
//
// It is written out field by field, rather than with reflect, to keep the
// package's imports pure; TestTasksEqualCoversEveryField fails when spec.Task
// gains a field this function does not know. Nil and empty maps and slices
// are equal, as they are after a JSON round trip through the registry.
func tasksEqual(a, b []*spec.Task) bool {
	return slices.EqualFunc(a, b, taskEqual)
}

func taskEqual(a, b *spec.Task) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name &&
		a.Driver == b.Driver &&
		configEqual(a.Config, b.Config) &&
		maps.Equal(a.Env, b.Env) &&
		a.Resources == b.Resources &&
		restartEqual(a.Restart, b.Restart) &&
		a.KillTimeout == b.KillTimeout &&
		a.KillSignal == b.KillSignal &&
		a.ShutdownDelay == b.ShutdownDelay &&
		a.Leader == b.Leader &&
		(a.Lifecycle == nil) == (b.Lifecycle == nil) && (a.Lifecycle == nil || *a.Lifecycle == *b.Lifecycle) &&
		(a.DispatchPayload == nil) == (b.DispatchPayload == nil) && (a.DispatchPayload == nil || *a.DispatchPayload == *b.DispatchPayload) &&
		(a.Logs == nil) == (b.Logs == nil) && (a.Logs == nil || *a.Logs == *b.Logs) &&
		slices.EqualFunc(a.Templates, b.Templates, templateEqual) &&
		slices.EqualFunc(a.Artifacts, b.Artifacts, artifactEqual) &&
		maps.Equal(a.Meta, b.Meta) &&
		slices.EqualFunc(a.Services, b.Services, serviceEqual) &&
		slices.EqualFunc(a.VolumeMounts, b.VolumeMounts, volumeMountEqual)
}

// volumeMountEqual: a task mounted elsewhere, or read-only where it
// wrote, runs something else; its instances are replaced.
func volumeMountEqual(a, b *spec.VolumeMount) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// volumesEqual reports whether two groups' volume blocks are the same: a
// changed volume (another host volume, read-only now) replaces the
// group's instances, which mount it when they start and may have to go
// to other nodes. Comparing with == keeps every field counted: a field
// == cannot compare would not compile here.
func volumesEqual(a, b []*spec.VolumeRequest) bool {
	return slices.EqualFunc(a, b, func(x, y *spec.VolumeRequest) bool {
		if x == nil || y == nil {
			return x == y
		}
		return *x == *y
	})
}

// templateEqual: a changed template replaces the task's instances, as a
// changed command does (the agent renders what it was given at start).
func templateEqual(a, b *spec.Template) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// artifactEqual: a changed artifact replaces the task's instances, as a
// changed template does (the agent fetches at the instance's first start).
func artifactEqual(a, b *spec.Artifact) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Source == b.Source && a.Destination == b.Destination && a.Mode == b.Mode && a.Chown == b.Chown &&
		maps.Equal(a.Options, b.Options) && maps.Equal(a.Headers, b.Headers)
}

// serviceEqual: a changed service or check replaces the task's instances,
// since an agent runs the checks of the task it was given.
func serviceEqual(a, b *spec.Service) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.PortLabel == b.PortLabel && slices.Equal(a.Tags, b.Tags) &&
		slices.EqualFunc(a.Checks, b.Checks, checkEqual)
}

func checkEqual(a, b *spec.Check) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Type == b.Type && a.PortLabel == b.PortLabel && a.Path == b.Path &&
		a.Command == b.Command && slices.Equal(a.Args, b.Args) &&
		a.Interval == b.Interval && a.Timeout == b.Timeout && a.Grace == b.Grace &&
		(a.Restart == nil) == (b.Restart == nil) && (a.Restart == nil || *a.Restart == *b.Restart)
}

func configEqual(a, b spec.TaskConfig) bool {
	return a.Command == b.Command &&
		slices.Equal(a.Args, b.Args) &&
		a.WorkDir == b.WorkDir &&
		a.User == b.User &&
		slices.EqualFunc(a.Prestart, b.Prestart, commandEqual) &&
		slices.EqualFunc(a.Poststop, b.Poststop, commandEqual) &&
		(a.Stop == nil) == (b.Stop == nil) && (a.Stop == nil || commandEqual(*a.Stop, *b.Stop)) &&
		a.Image == b.Image &&
		slices.Equal(a.Entrypoint, b.Entrypoint) &&
		slices.Equal(a.Ports, b.Ports) &&
		maps.Equal(a.Labels, b.Labels) &&
		a.Privileged == b.Privileged &&
		a.NetworkMode == b.NetworkMode &&
		a.PidMode == b.PidMode &&
		slices.Equal(a.Volumes, b.Volumes) &&
		maps.Equal(a.PortMap, b.PortMap) &&
		slices.EqualFunc(a.Mounts, b.Mounts, func(x, y *spec.DockerMount) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }) &&
		slices.Equal(a.CapAdd, b.CapAdd) &&
		slices.Equal(a.CapDrop, b.CapDrop) &&
		maps.Equal(a.Ulimit, b.Ulimit) &&
		maps.Equal(a.Sysctl, b.Sysctl) &&
		a.ForcePull == b.ForcePull &&
		a.ImagePullTimeout == b.ImagePullTimeout &&
		a.Hostname == b.Hostname &&
		slices.Equal(a.DNSServers, b.DNSServers) &&
		slices.Equal(a.DNSSearchDomains, b.DNSSearchDomains) &&
		slices.Equal(a.DNSOptions, b.DNSOptions) &&
		slices.Equal(a.ExtraHosts, b.ExtraHosts) &&
		a.Init == b.Init &&
		a.ReadonlyRootfs == b.ReadonlyRootfs &&
		a.ShmSize == b.ShmSize
}

func commandEqual(a, b spec.Command) bool {
	return a.Command == b.Command && slices.Equal(a.Args, b.Args)
}

func restartEqual(a, b *spec.RestartPolicy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Allowed() == b.Allowed() && (a.Attempts == nil) == (b.Attempts == nil) &&
		a.Interval == b.Interval && a.Delay == b.Delay && a.Mode == b.Mode
}

func dnsEqual(a, b *spec.DNSConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Servers, b.Servers) && slices.Equal(a.Searches, b.Searches) && slices.Equal(a.Options, b.Options)
}
