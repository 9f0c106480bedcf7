package jobfile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/drover-org/drover/internal/suggest"
)

// Nomad's JSON API form of a job, {"Job": {"ID": "web", "TaskGroups":
// [...]}}, as `nomad job run -output` prints it and Nomad's /v1/jobs takes
// it, is read through the same schema as drover's own JSON: each field's
// key there is its Go field name (spec.Job.Datacenters is "Datacenters"),
// but for the few that Nomad names otherwise, in apiRenamed. The tree is
// rewritten into drover's JSON keys (durations, which Nomad writes in
// nanoseconds, into duration strings) and then checked and decoded as
// drover's JSON is, keeping every value's place in the file.

// apiRenamed are the fields whose key in Nomad's API differs from their Go
// name, by "Type.GoField".
var apiRenamed = map[string]string{
	"Job.Name":                "ID",
	"Job.Parameterized":       "ParameterizedJob",
	"Periodic.Cron":           "Spec",
	"Periodic.Crons":          "Specs",
	"Job.Groups":              "TaskGroups",
	"Group.Restart":           "RestartPolicy",
	"Group.Reschedule":        "ReschedulePolicy",
	"Group.Network":           "Networks",
	"Task.Restart":            "RestartPolicy",
	"Task.Logs":               "LogConfig",
	"Constraint.Attribute":    "LTarget",
	"Constraint.Operator":     "Operand",
	"Constraint.Value":        "RTarget",
	"Affinity.Attribute":      "LTarget",
	"Affinity.Operator":       "Operand",
	"Affinity.Value":          "RTarget",
	"Spread.Targets":          "SpreadTarget",
	"Port.Static":             "Value",
	"Check.Restart":           "CheckRestart",
	"Service.Task":            "TaskName",
	"Check.Task":              "TaskName",
	"Template.Data":           "EmbeddedTmpl",
	"Artifact.Source":         "GetterSource",
	"Artifact.Destination":    "RelativeDest",
	"Artifact.Mode":           "GetterMode",
	"Artifact.Options":        "GetterOptions",
	"Artifact.Headers":        "GetterHeaders",
	"Template.Source":         "SourcePath",
	"Template.Destination":    "DestPath",
	"Template.Env":            "Envvars",
	"Template.LeftDelimiter":  "LeftDelim",
	"Template.RightDelimiter": "RightDelim",
}

// apiDefaults are values of Nomad API fields drover does not have that
// mean what drover does anyway, as JSON, by "Type.Key": `nomad job run
// -output` and `nomad job inspect` write them out. An object matches
// when its fields that are not zero do.
var apiDefaults = map[string]string{
	"Job.Region":             `"global"`,
	"Port.HostNetwork":       `"default"`,
	"Service.Provider":       `"consul"`,
	"Service.AddressMode":    `"auto"`,
	"Service.OnUpdate":       `"require_healthy"`,
	"Check.AddressMode":      `"host"`,
	"Check.OnUpdate":         `"require_healthy"`,
	"UpdateStrategy.Stagger": `30000000000`,
	// A job without an update block: Nomad's job-level placeholder.
	"Job.Update":          `{"Stagger": 30000000000, "MaxParallel": 1}`,
	"Group.EphemeralDisk": `{"SizeMB": 300}`,
	"Group.Migrate":       `{"MaxParallel": 1, "HealthCheck": "checks", "MinHealthyTime": 10000000000, "HealthyDeadline": 300000000000}`,
	"Group.Consul":        `{"Cluster": "default"}`,
	"Periodic.SpecType":   `"cron"`,
	"Scaling.Type":        `"horizontal"`,
	// A volume_mount's propagation Nomad writes out when unset.
	"VolumeMount.PropagationMode": `"private"`,
}

// apiServerSet are the fields of a Nomad job that its servers set, which
// `nomad job inspect` prints: a job read back is submitted without them,
// as drover's own server-owned fields (those HCL does not write) are.
var apiServerSet = map[string]bool{
	"Status": true, "StatusDescription": true, "CreateIndex": true, "JobModifyIndex": true,
	"Stable": true, "NomadTokenID": true, "Dispatched": true, "ParentID": true, "VersionTag": true,
	// A group's scaling policy as Nomad's servers store it: its ID, its
	// target (the job and group it is in) and its indexes.
	"Scaling.ID": true, "Scaling.Target": true, "Scaling.CreateIndex": true, "Scaling.ModifyIndex": true,
}

// isDefault reports whether v is Nomad's default for the field key of a
// struct of type typ.
func isDefault(typ, key string, v *jnode) bool {
	d, ok := apiDefaults[typ+"."+key]
	if !ok {
		return false
	}
	var want, got any
	if json.Unmarshal([]byte(d), &want) != nil || json.Unmarshal(v.appendJSON(nil), &got) != nil {
		return false
	}
	return reflect.DeepEqual(nonZero(want), nonZero(got))
}

// nonZero drops an object's zero-valued fields, nested.
func nonZero(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, e := range m {
		if e = nonZero(e); e != nil && e != false && e != float64(0) && e != "" {
			if em, ok := e.(map[string]any); !ok || len(em) > 0 {
				out[k] = e
			}
		}
	}
	return out
}

// isNomadAPI reports whether root is a job in Nomad's API form: wrapped
// in "Job", or a bare one with TaskGroups.
func isNomadAPI(root *jnode) bool {
	return root.kind == 'o' && (slices.Contains(root.keys, "Job") || slices.Contains(root.keys, "TaskGroups"))
}

// fromNomadAPI returns the job in root, a Nomad API form, rewritten into
// drover's keys; what cannot be is reported and cut.
func (k *jchecker) fromNomadAPI(root *jnode) *jnode {
	job := root
	if i := slices.Index(root.keys, "Job"); i >= 0 {
		// The rest of a register request (EnforceIndex, PolicyOverride,
		// ...) asks nothing of the job.
		job = root.vals[i]
		if job.kind != 'o' {
			k.fail(job, "Job", "Job must be an object, got %s", job.typeName())
			return nil
		}
	}
	k.apiObject(job, jobTree, "Job")
	return job
}

// apiObject rewrites n, a Nomad API object of schema s, in place.
func (k *jchecker) apiObject(n *jnode, s *schema, path string) {
	if n.kind != 'o' {
		return // the checker says what it should be
	}
	byAPI := map[string]*fieldSchema{}
	var names []string
	for _, f := range s.fields {
		byAPI[f.api] = f
		names = append(names, f.api)
	}
	var keys []string
	var koffs []int
	var vals []*jnode
	keep := func(key string, off int, v *jnode) {
		keys, koffs, vals = append(keys, key), append(koffs, off), append(vals, v)
	}
	for i, key := range n.keys {
		v, at := n.vals[i], &jnode{off: n.koffs[i]}
		field := path + "." + key
		f := byAPI[key]
		switch {
		case v.kind == 'z', v.zeroish() && (f == nil || f.kind == kObject && f.obj != configTree):
			continue // Nomad's unset: null, or an object of zero values
		case s == jobTree && key == "Name":
			// Nomad's Name defaults to the ID; drover has one name.
			if id := keyValue(n, "ID"); v.kind == 's' && id != nil && id.kind == 's' && id.text != v.text {
				k.fail(at, field, "Name %q differs from ID %q: drover names a job once; make them the same", v.text, id.text)
			} else if id == nil {
				keep(byAPI["ID"].json, n.koffs[i], v)
			}
			continue
		case f != nil && f.hcl == "" && !f.label, f == nil && apiServerSet[key] && s == jobTree, f == nil && apiServerSet[s.typ.Name()+"."+key]:
			continue // set by a server: not the job's to say
		case f == nil && s.body.warned[snake(key)] != "" && !isDefault(s.typ.Name(), key, v):
			// Taken and ignored, as in HCL: the checker warns of it.
			keep(snake(key), n.koffs[i], v)
			continue
		case f == nil || isDefault(s.typ.Name(), key, v):
			if v.zeroish() || isDefault(s.typ.Name(), key, v) {
				continue
			}
			mean := ""
			if sug := suggest.Closest(key, names); sug != "" {
				mean = fmt.Sprintf("; did you mean %q?", sug)
			}
			k.fail(at, field, "%s is not something drover takes yet: remove it (docs/nomad.md lists what drover takes)%s%s",
				key, insteadHint(snake(key)), mean)
			continue
		case f.kind == kObject && f.obj != configTree:
			if s.typ.Name() == "Group" && key == "Networks" {
				v = k.apiNetworks(v, field)
				if v == nil {
					continue
				}
			}
			k.apiObject(v, f.obj, field)
		case f.kind == kObjectList && v.kind == 'o' && s.typ.Name() == "Group" && key == "Volumes":
			v = apiVolumes(v)
			for j, e := range v.vals {
				k.apiObject(e, f.obj, fmt.Sprintf("%s[%d]", field, j))
			}
		case f.kind == kObjectList && v.kind == 'a':
			for j, e := range v.vals {
				k.apiObject(e, f.obj, fmt.Sprintf("%s[%d]", field, j))
			}
		case f.kind == kDuration && v.kind == 'n':
			// Nomad writes a duration in nanoseconds.
			ns, err := strconv.ParseInt(v.text, 10, 64)
			if err != nil || ns < 0 {
				k.fail(v, field, "%s must be a duration in nanoseconds, got %s", key, v.text)
				continue
			}
			v = &jnode{kind: 's', off: v.off, text: time.Duration(ns).String()}
		}
		keep(f.json, n.koffs[i], v)
	}
	n.keys, n.koffs, n.vals = keys, koffs, vals
}

// apiNetworks takes a group's Networks, a list in Nomad's API, as the one
// network a drover group has, its ReservedPorts and DynamicPorts as its
// Ports: a dynamic port's Value is the one Nomad picked, not a static port.
func (k *jchecker) apiNetworks(v *jnode, field string) *jnode {
	if v.kind != 'a' {
		return v // the checker says it should be an object
	}
	if len(v.vals) > 1 {
		k.fail(v.vals[1], field, "%d networks: a drover group has one", len(v.vals))
		return nil
	}
	if len(v.vals) == 0 || v.vals[0].kind != 'o' {
		return nil
	}
	n := v.vals[0]
	var ports *jnode
	for _, key := range []string{"ReservedPorts", "DynamicPorts"} {
		i := slices.Index(n.keys, key)
		if i < 0 {
			continue
		}
		list := n.vals[i]
		if ports == nil {
			ports = &jnode{kind: 'a', off: list.off}
		}
		n.keys, n.koffs, n.vals = slices.Delete(n.keys, i, i+1), slices.Delete(n.koffs, i, i+1), slices.Delete(n.vals, i, i+1)
		if list.kind != 'a' {
			k.fail(list, field+"."+key, "%s must be an array of ports, got %s", key, list.typeName())
			continue
		}
		for _, p := range list.vals {
			if j := slices.Index(p.keys, "Value"); j >= 0 && key == "DynamicPorts" {
				p.keys, p.koffs, p.vals = slices.Delete(p.keys, j, j+1), slices.Delete(p.koffs, j, j+1), slices.Delete(p.vals, j, j+1)
			}
			ports.vals = append(ports.vals, p)
		}
	}
	if ports != nil {
		n.keys, n.koffs, n.vals = append(n.keys, "Ports"), append(n.koffs, ports.off), append(n.vals, ports)
	}
	return n
}

// apiVolumes takes a group's Volumes, an object by name in Nomad's API,
// as the list of volume blocks a drover group has, in the order written:
// each entry's Name is its key unless it says its own.
func apiVolumes(v *jnode) *jnode {
	out := &jnode{kind: 'a', off: v.off}
	for i, name := range v.keys {
		e := v.vals[i]
		if e.kind == 'o' && keyValue(e, "Name") == nil {
			e.keys, e.koffs = append(e.keys, "Name"), append(e.koffs, v.koffs[i])
			e.vals = append(e.vals, &jnode{kind: 's', off: v.koffs[i], text: name})
		}
		out.vals = append(out.vals, e)
	}
	return out
}

// keyValue is the value of key in object n, or nil.
func keyValue(n *jnode, key string) *jnode {
	if i := slices.Index(n.keys, key); i >= 0 {
		return n.vals[i]
	}
	return nil
}

// zeroish reports whether n is what Nomad writes for a field left unset:
// null, false, 0, "", [], {} or an object of such.
func (n *jnode) zeroish() bool {
	switch n.kind {
	case 'o':
		for _, v := range n.vals {
			if !v.zeroish() {
				return false
			}
		}
		return true
	case 'z':
		return true
	case 'b':
		return !n.truth
	case 'n':
		f, err := strconv.ParseFloat(n.text, 64)
		return err == nil && f == 0
	case 's':
		return n.text == ""
	}
	return len(n.vals) == 0
}

// snake writes a Go name in drover's JSON style: "EphemeralDisk" ->
// "ephemeral_disk", for the hints keyed that way.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 && !unicode.IsUpper(rune(name[i-1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
