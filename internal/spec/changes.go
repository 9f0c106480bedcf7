package spec

// JobDiff is GET /v1/jobs/{name}/diff: what changed from one version of a
// job to another (Changes, as drover history lists them).
type JobDiff struct {
	From    uint64      `json:"from"`
	To      uint64      `json:"to"`
	Changes []JobChange `json:"changes"`
}

// JobChange is a Change as the API answers it.
type JobChange struct {
	// Op is "+" (only the newer version has the field), "-" (only the
	// older one), or "~" (both, with different values).
	Op   string `json:"op"`
	Path string `json:"path"`
	// From and To are the values as JSON; "" where the field is absent.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Line is the change as drover history prints it.
	Line string `json:"line"`
}

// NewJobDiff is Changes(from, to) as the API answers it.
func NewJobDiff(from, to *Job) JobDiff {
	d := JobDiff{From: from.Version, To: to.Version, Changes: []JobChange{}}
	for _, c := range Changes(from, to) {
		d.Changes = append(d.Changes, JobChange{Op: string(c.Op), Path: c.Path, From: c.From, To: c.To, Line: c.String()})
	}
	return d
}
