package spec

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// Periodic makes a job a template that the leader launches on a cron
// schedule: each launch is a child job named PeriodicChildName, the
// template's spec without its periodic block. The template itself runs
// nothing.
//
// The cron expressions and the time zone are checked where they are
// parsed (internal/periodic), not here: parsing them needs a library and
// the time zone database.
type Periodic struct {
	// Crons are cron expressions (five fields, or six with seconds first,
	// or @hourly, @daily, @every 1h30m...); a launch is due at any of them.
	Crons []string `json:"crons,omitempty"`
	// Cron is one more expression, Nomad's older single form.
	Cron string `json:"cron,omitempty"`
	// ProhibitOverlap skips a launch while the previous child still runs.
	ProhibitOverlap bool `json:"prohibit_overlap,omitempty"`
	// TimeZone is the IANA zone the expressions are read in; "" is UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// Enabled: false stops the launches (a forced launch still runs);
	// unset is true.
	Enabled *bool `json:"enabled,omitempty"`
}

// Specs is every cron expression of p: Crons, then Cron.
func (p *Periodic) Specs() []string {
	out := append([]string(nil), p.Crons...)
	if p.Cron != "" {
		out = append(out, p.Cron)
	}
	return out
}

// On reports whether the schedule launches (Enabled unset or true).
func (p *Periodic) On() bool { return p != nil && (p.Enabled == nil || *p.Enabled) }

// Parameterized makes a job a template that runs only when dispatched
// (`drover job dispatch`): each dispatch is a child job with its own meta
// and payload.
type Parameterized struct {
	// Payload is "optional" (the default), "required" or "forbidden".
	Payload string `json:"payload,omitempty"`
	// MetaRequired are meta keys every dispatch must set; MetaOptional
	// the ones it may set. A dispatch may set no other.
	MetaRequired []string `json:"meta_required,omitempty"`
	MetaOptional []string `json:"meta_optional,omitempty"`
}

// The values of Parameterized.Payload.
const (
	PayloadOptional  = "optional"
	PayloadRequired  = "required"
	PayloadForbidden = "forbidden"
)

// MaxPayload is the largest dispatch payload, in bytes (Nomad's limit).
const MaxPayload = 16 * 1024

// DispatchPayload writes a dispatched job's payload into the task's
// local/ directory, as File.
type DispatchPayload struct {
	File string `json:"file"`
}

// IsTemplate reports whether j only launches child jobs (periodic or
// parameterized) and runs nothing itself.
func (j *Job) IsTemplate() bool { return j.Periodic != nil || j.Parameterized != nil }

// PeriodicChildName is the name of the child job launched from the
// periodic job parent at launch: "parent@periodic-<unix seconds>" (Nomad
// writes parent/periodic-<unix>; a job name is a key and URL segment, so
// it cannot hold '/').
func PeriodicChildName(parent string, launch time.Time) string {
	return fmt.Sprintf("%s@periodic-%d", parent, launch.Unix())
}

// DispatchChildName is the name of a child job dispatched from parent at
// t with the random suffix id: "parent@dispatch-<unix>-<id>".
func DispatchChildName(parent string, t time.Time, id string) string {
	return fmt.Sprintf("%s@dispatch-%d-%s", parent, t.Unix(), id)
}

// validateKinds checks the periodic and parameterized blocks and the
// tasks' dispatch_payload.
func (j *Job) validateKinds(ps *Problems) {
	templ := ""
	switch {
	case j.Periodic != nil && j.Parameterized != nil:
		ps.Add("periodic", "a job is either periodic or parameterized, not both; dispatch a parameterized job from a periodic one's task, or make two jobs")
	case j.Periodic != nil:
		templ = "periodic"
	case j.Parameterized != nil:
		templ = "parameterized"
	}
	if templ != "" && !j.Type.Completes() {
		ps.Add(templ, "a %s job must be of type \"batch\" or \"sysbatch\" (its launches run to completion), not %q", templ, j.Type)
	}
	if p := j.Periodic; p != nil && len(p.Specs()) == 0 {
		ps.Add("periodic.crons", "a periodic block needs a schedule: crons = [\"*/15 * * * *\"] (or cron = \"...\")")
	}
	if p := j.Parameterized; p != nil {
		switch p.Payload {
		case "", PayloadOptional, PayloadRequired, PayloadForbidden:
		default:
			ps.Add("parameterized.payload", "unknown payload %q; use \"optional\" (the default), \"required\" or \"forbidden\"", p.Payload)
		}
		seen := map[string]string{}
		for _, what := range []string{"meta_required", "meta_optional"} {
			keys := p.MetaRequired
			if what == "meta_optional" {
				keys = p.MetaOptional
			}
			for i, k := range keys {
				if k == "" {
					ps.Add(fmt.Sprintf("parameterized.%s[%d]", what, i), "a meta key must not be empty")
				} else if other, dup := seen[k]; dup && other != what {
					ps.Add("parameterized."+what, "meta key %q is both required and optional; list it once", k)
				}
				seen[k] = what
			}
		}
	}
	for gi, g := range j.Groups {
		if g == nil {
			continue
		}
		for ti, t := range g.Tasks {
			if t == nil || t.DispatchPayload == nil {
				continue
			}
			at := fmt.Sprintf("groups[%d].tasks[%d].dispatch_payload", gi, ti)
			switch f := t.DispatchPayload.File; {
			case j.Parameterized == nil && j.ParentID == "":
				ps.Add(at, "dispatch_payload needs a parameterized job: add a parameterized block to the job, or remove it")
			case f == "" || path.IsAbs(f) || path.Clean(f) == ".." || strings.HasPrefix(path.Clean(f), "../") || strings.ContainsRune(f, 0):
				ps.Add(at+".file", "file %q must be a relative path inside the task's local/ directory, such as \"input.json\"", f)
			}
		}
	}
}

// DispatchMetaProblem says what is wrong with the meta of a dispatch of j,
// or "" when it is right: every required key set, no key that is neither
// required nor optional.
func (j *Job) DispatchMetaProblem(meta map[string]string) string {
	p := j.Parameterized
	var missing []string
	for _, k := range p.MetaRequired {
		if _, ok := meta[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("job %q requires meta %q; dispatch it with -meta %s=VALUE for each", j.Name, missing, missing[0])
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		if !slices.Contains(p.MetaRequired, k) && !slices.Contains(p.MetaOptional, k) {
			return fmt.Sprintf("job %q takes no meta %q: its parameterized block allows %q (required) and %q (optional)", j.Name, k, p.MetaRequired, p.MetaOptional)
		}
	}
	return ""
}
