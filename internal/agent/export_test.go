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
