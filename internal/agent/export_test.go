package agent

import "time"

// SetUsageTiming makes a's usage sampler sample every `every` and report
// at least every maxAge, so that a test need not wait usageEvery; call it
// before Run.
func SetUsageTiming(a *Agent, every, maxAge time.Duration) {
	a.usage.every, a.usage.maxAge = every, maxAge
}

// SinceContact is how long since a server last answered a.
func SinceContact(a *Agent) time.Duration { return a.sinceContact() }

// DirPoolStats is how many directory trees a's pools hold ready and have
// handed out, alloc and task trees together (dirpool.go).
func DirPoolStats(a *Agent) (ready, taken int) {
	ps := a.dirPools
	if ps == nil {
		return 0, 0
	}
	return len(ps.alloc.ready) + len(ps.task.ready), int(ps.alloc.taken.Load() + ps.task.taken.Load())
}

// CanPass is canPass, for tests run as another user.
var CanPass = canPass
