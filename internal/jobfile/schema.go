package jobfile

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/drover-org/drover/internal/spec"
)

// The job language is declared once, by the spec structs themselves: a
// field's json tag is its key in JSON and YAML, its Go type the shape of
// its value; an hcl tag says where HCL writes it otherwise (see package
// spec). A reflection pass, at init, turns the structs into schemas, from
// which every decoder checks what it reads. What a struct cannot say is in
// the notes below, and Nomad's names that drover does not take are in one
// table at the end.

// kind is the shape a field's value has.
type kind int

const (
	kString kind = iota
	kInt
	kUint
	kBool
	kDuration
	kTime
	kStringMap
	kStringList
	kObject
	kObjectList
	kAny
)

// fieldSchema is one field of a spec struct, as job files write it.
type fieldSchema struct {
	json  string // its JSON key
	api   string // its key in Nomad's JSON API form (nomadapi.go)
	hcl   string // its HCL name; "" when HCL does not write it
	label bool   // in HCL, the label of the struct's block
	index int    // its index in the struct
	kind  kind
	obj   *schema // for kObject and kObjectList
	note
}

// note is what a field's Go type and tags cannot say, keyed in notes by
// "Type.json_key".
type note struct {
	// zero, when set, refuses a written 0 with this message: for a field
	// whose 0 means "unset, use the default" (a weight).
	zero string
	// text reads a number written in HCL as its text: a constraint's
	// value = 3, as Nomad does.
	text bool
}

var notes = map[string]note{
	"Affinity.weight":      {zero: zeroAffinityWeight},
	"Spread.weight":        {zero: zeroSpreadWeight},
	"Constraint.attribute": {text: true},
	"Constraint.operator":  {text: true},
	"Constraint.value":     {text: true},
	"Affinity.attribute":   {text: true},
	"Affinity.operator":    {text: true},
	"Affinity.value":       {text: true},
	"Spread.attribute":     {text: true},
}

// A weight of 0 is how the spec says "unset", so a weight written as 0
// would silently become the default, 50: the opposite of what 0 suggests.
// The decoders refuse it where it is written (validation cannot tell a
// written 0 from a missing weight).
const (
	zeroAffinityWeight = "weight 0 would mean the default weight, 50; use 1 to 100 to prefer matching nodes, -1 to -100 to avoid them, or remove the affinity"
	zeroSpreadWeight   = "weight 0 would mean the default weight, 50; use 1 to 100, or remove the spread"
)

// fresh holds, by struct type, the value a struct starts from before a
// block is decoded into it: the defaults its JSON decoding gives a field
// left out (spec.Group.UnmarshalJSON).
var fresh = map[reflect.Type]reflect.Value{
	reflect.TypeFor[spec.Group](): reflect.ValueOf(spec.Group{Count: spec.DefaultCount}),
}

// what names a struct in messages ("unknown field "x" in restart policy")
// where its type's name, split into words, would not say it as well.
var what = map[string]string{
	"Command":       "prestart, stop or poststop command",
	"TaskConfig":    "config",
	"CheckRestart":  "check_restart",
	"DockerMount":   "mount",
	"VolumeRequest": "volume",
	"VolumeMount":   "volume_mount",
}

// schema is one spec struct as job files write it.
type schema struct {
	what      string // "restart policy", for messages
	typ       reflect.Type
	fields    []*fieldSchema
	byJSON    map[string]*fieldSchema
	jsonNames []string // sorted, for suggestions
	// body is what the struct's HCL block may hold, and label the field
	// its label sets, if it takes one.
	body  bodySchema
	byHCL map[string]*fieldSchema
	label *fieldSchema
}

var (
	durationType = reflect.TypeFor[spec.Duration]()
	timeType     = reflect.TypeFor[time.Time]()

	// schemas holds every schema made, by struct type, so that a struct
	// used in several places (a restart policy) has one.
	schemas = map[reflect.Type]*schema{}

	jobTree    = schemaOf(reflect.TypeFor[spec.Job]())
	taskTree   = schemaOf(reflect.TypeFor[spec.Task]())
	configTree = schemaOf(reflect.TypeFor[spec.TaskConfig]())
	// statusTree is spec.JobStatus, the wrapper `drover status -o json`
	// prints; only its job is read, so the rest is not checked.
	statusTree = opaque(reflect.TypeFor[spec.JobStatus]())
)

// schemaOf returns the schema of struct type t, making it (and those of
// the structs it holds) on first use.
func schemaOf(t reflect.Type) *schema {
	if s, ok := schemas[t]; ok {
		return s
	}
	s := &schema{what: structWhat(t), typ: t, byJSON: map[string]*fieldSchema{}, byHCL: map[string]*fieldSchema{},
		body: bodySchema{members: map[string]member{}, unsupported: unsupportedIn[t.Name()], warned: notHereIn[t.Name()]}}
	schemas[t] = s
	for i := range t.NumField() {
		sf := t.Field(i)
		name := jsonName(sf)
		if name == "" {
			continue
		}
		k, obj := kindOf(sf.Type)
		f := &fieldSchema{json: name, index: i, kind: k, obj: obj, note: notes[t.Name()+"."+name]}
		f.hcl, f.label = hclName(sf, name)
		f.api = cmp.Or(apiRenamed[t.Name()+"."+sf.Name], sf.Name)
		if f.hcl != "" && (k == kUint || k == kTime) {
			panic(fmt.Sprintf("jobfile: HCL has no way to write %s.%s; tag it hcl:\"-\"", t.Name(), sf.Name))
		}
		s.fields = append(s.fields, f)
		s.byJSON[name] = f
		s.jsonNames = append(s.jsonNames, name)
		switch {
		case f.label:
			s.label = f
		case f.hcl != "":
			s.byHCL[f.hcl] = f
			s.body.members[f.hcl] = memberOf(f.kind)
		}
	}
	slices.Sort(s.jsonNames)
	return s
}

// hclName is a struct field's name in HCL, from its hcl tag or else its
// JSON key, and whether it is its block's label.
func hclName(sf reflect.StructField, jsonKey string) (string, bool) {
	tag, ok := sf.Tag.Lookup("hcl")
	if !ok {
		return jsonKey, false
	}
	if tag == "-" {
		return "", false
	}
	name, opt, _ := strings.Cut(tag, ",")
	if opt == "label" {
		return "", true
	}
	return name, false
}

// memberOf says how HCL writes a field of kind k: a struct as a block, one
// block per element for a list of them, a map as either (Nomad writes
// meta = { ... } and meta { ... }), anything else as an attribute.
func memberOf(k kind) member {
	switch k {
	case kObject:
		return asBlock
	case kObjectList:
		return asBlock | repeated
	case kStringMap:
		return asAttr | asBlock
	}
	return asAttr
}

// opaque is the schema of struct type t whose fields take any value.
func opaque(t reflect.Type) *schema {
	s := &schema{what: structWhat(t), typ: t, byJSON: map[string]*fieldSchema{}}
	for i := range t.NumField() {
		if name := jsonName(t.Field(i)); name != "" {
			f := &fieldSchema{json: name, index: i, kind: kAny}
			s.fields = append(s.fields, f)
			s.byJSON[name] = f
			s.jsonNames = append(s.jsonNames, name)
		}
	}
	slices.Sort(s.jsonNames)
	return s
}

// jsonName is a struct field's JSON key, or "" for a field JSON leaves out.
func jsonName(sf reflect.StructField) string {
	tag := sf.Tag.Get("json")
	if tag == "-" || !sf.IsExported() {
		return ""
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return sf.Name
}

// structWhat names a struct type in messages: what's entry, else its name
// in words ("ReschedulePolicy": "reschedule policy").
func structWhat(t reflect.Type) string {
	if w, ok := what[t.Name()]; ok {
		return w
	}
	var b strings.Builder
	for i, r := range t.Name() {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// kindOf is the kind of a field of Go type t, and the schema of the struct
// it holds, if any. A type no job file can write panics: the spec structs
// are fixed at build time, and the tests build every schema.
func kindOf(t reflect.Type) (kind, *schema) {
	switch t {
	case durationType:
		return kDuration, nil
	case timeType:
		return kTime, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Struct {
			return kObject, schemaOf(t.Elem())
		}
		return kindOf(t.Elem())
	case reflect.Struct:
		return kObject, schemaOf(t)
	case reflect.String:
		return kString, nil
	case reflect.Int, reflect.Int64:
		return kInt, nil
	case reflect.Uint64:
		return kUint, nil
	case reflect.Bool:
		return kBool, nil
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
			return kStringMap, nil
		}
	case reflect.Slice:
		e := t.Elem()
		if e.Kind() == reflect.String {
			return kStringList, nil
		}
		if e.Kind() == reflect.Uint8 {
			return kString, nil // []byte: base64 text in JSON
		}
		if e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		if e.Kind() == reflect.Struct {
			return kObjectList, schemaOf(e)
		}
	}
	panic(fmt.Sprintf("jobfile: no job file can write a %s", t))
}

// labelled block types take exactly one label: what the label is, and the
// block written with one, for messages. Each is a struct with a label
// field; examples holds the blocks better shown with a body.
var labelled = labelledBlocks()

var examples = map[string]string{
	"port":   `port "http" { static = 8080 }`,
	"target": `target "us-east" { percent = 50 }`,
}

type labelInfo struct{ what, example string }

func labelledBlocks() map[string]labelInfo {
	out := map[string]labelInfo{}
	add := func(block string, s *schema) {
		if s.label == nil {
			return
		}
		ex := examples[block]
		if ex == "" {
			ex = fmt.Sprintf("%s %q { ... }", block, s.label.json)
		}
		out[block] = labelInfo{s.label.json, ex}
		s.body.label, s.body.labelExample = s.label.json, ex
	}
	add("job", jobTree)
	walk(jobTree, func(f *fieldSchema) { add(f.hcl, f.obj) })
	return out
}

// home is a name written as an attribute or as a block.
type home struct {
	name  string
	block bool
}

// homes says where each name drover knows belongs, for one written in the
// wrong block ("count belongs in a group block"): the blocks that take it
// in that form, in the order a job file nests them, leaving out those
// inside a block that has it as an attribute only (command is in a config block,
// not also in its prestart blocks, which are part of it).
var homes = homesOf()

func homesOf() map[home]string {
	lists := map[home][]string{}
	var visit func(block string, s *schema, parent map[string]member)
	visit = func(block string, s *schema, parent map[string]member) {
		for _, f := range s.fields {
			m := s.body.members[f.hcl]
			if m == 0 || parent[f.hcl] == asAttr {
				continue
			}
			h := home{f.hcl, m&asBlock != 0}
			if !slices.Contains(lists[h], block) {
				lists[h] = append(lists[h], block)
			}
		}
		for _, f := range s.fields {
			if f.obj != nil && f.hcl != "" {
				visit(f.hcl, f.obj, s.body.members)
			}
		}
	}
	visit("job", jobTree, nil)
	out := map[home]string{}
	for h, l := range lists {
		out[h] = strings.Join(l, " or ")
		if len(l) > 2 {
			out[h] = strings.Join(l[:len(l)-1], ", ") + " or " + l[len(l)-1]
		}
	}
	return out
}

// homeOf says where name belongs written as a block or not, else where it
// belongs written the other way.
func homeOf(name string, block bool) string {
	return cmp.Or(homes[home{name, block}], homes[home{name, !block}])
}

// walk calls fn for each block field under s, once per struct and name.
func walk(s *schema, fn func(*fieldSchema)) {
	seen := map[*schema]bool{}
	var visit func(*schema)
	visit = func(s *schema) {
		if seen[s] {
			return
		}
		seen[s] = true
		for _, f := range s.fields {
			if f.obj != nil && f.hcl != "" {
				fn(f)
				visit(f.obj)
			}
		}
	}
	visit(s)
}

// Nomad's names that drover does not take.

// unsupported are Nomad job-file names drover does not implement yet, in
// any block. They get their own message so that a Nomad file fails with a
// list of what to remove, not with "unknown".
var unsupported = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`
		multiregion
		device numa
		action schedule secret ui sidecar_service sidecar_task
		all_at_once vault_token consul_token
		cores iops
		render_templates max_kill_timeout kind id`) {
		unsupported[n] = true
	}
}

// unsupportedIn are the Nomad names drover does not implement in the block
// of one struct only, by the struct's name.
var unsupportedIn = map[string][]string{
	// Ports are reserved on the node's own address; mode bridge maps them
	// into the instance's namespace. No CNI plugins.
	"Network": {"cni"},
	"Port":    {"host_network"},
	// Services are registered in drover's own catalog, so Nomad's
	// provider and Consul's extras have no meaning here.
	"Service": {"address", "address_mode", "canary_meta", "enable_tag_override",
		"tagged_addresses", "meta"},
	"Check": {"method", "header", "body", "protocol", "tls_skip_verify", "tls_server_name", "initial_status",
		"success_before_passing", "failures_before_critical", "failures_before_warning", "address_mode",
		"expose", "grpc_service", "grpc_use_tls"},
	"CheckRestart": {"ignore_warnings"},
}

// instead says what to write for an unsupported Nomad name that drover has
// another way to say.
var instead = map[string]string{
	"host_network": "ports are reserved on the node's own address (its network.ip attribute)",
}

// notHere are Nomad blocks that ask for something drover does not have
// (Vault, Consul, CSI) where a job still runs without it: a file with one
// is valid, and each block is a warning saying what drover does instead,
// or that it does nothing. The block's content is not read.
var notHere = map[string]string{
	"vault":      "drover has no Vault: no token is fetched, VAULT_TOKEN and secrets/vault_token are not written, and templates cannot read Vault secrets; the block does nothing",
	"consul":     "drover has no Consul: services are registered in drover's own catalog (its API and DNS), so this block's settings do nothing",
	"identity":   "drover issues no workload identities: no token or JWT is written into the task (NOMAD_TOKEN, secrets/nomad_token are not set); the block does nothing",
	"csi_plugin": "drover has no CSI: the task runs as an ordinary task, and no storage plugin is registered",
	"connect":    "drover has no Consul Connect service mesh: no sidecar proxy runs and no upstream is bound to a local port; the service is registered in drover's catalog, reach the others by their drover DNS names or addresses",
}

// notHereIn are Nomad attributes drover takes in the block of one struct
// only, by the struct's name, and does nothing with: each is a warning
// saying so.
var notHereIn = map[string]map[string]string{
	"Network": {"mbits": "drover reserves no bandwidth (Nomad has deprecated mbits); mbits does nothing"},
	"Job":     {"region": "drover has no regions: the job runs in the cluster it is submitted to; region does nothing"},
	"Group": {
		"max_client_disconnect":      "drover replaces the instances of a node declared down (one heartbeat TTL after its last heartbeat) at once, and a node only cut off runs its copies until it comes back, as Nomad does without this setting; disconnect { stop_on_client_after } stops the cut-off copies first so that there is never more than one. max_client_disconnect does nothing",
		"prevent_reschedule_on_lost": "drover replaces the instances of a node declared down; to wait for them instead, disconnect { stop_on_client_after } places the replacement only after the cut-off copy has stopped. prevent_reschedule_on_lost does nothing",
	},
	"DisconnectPolicy": {
		"lost_after": "drover declares a node down one heartbeat TTL after its last heartbeat and replaces its instances then (after stop_on_client_after, when set); lost_after does nothing",
		"replace":    "drover replaces the instances of a node declared down (after stop_on_client_after, when set, so that the cut-off copy has stopped first); replace does nothing",
		"reconcile":  "drover keeps no second copy to choose between once stop_on_client_after is set; without it both copies run until the node comes back; reconcile does nothing",
	},
	// Services go to drover's own catalog, whatever the provider; what
	// only Consul does with a service or a check is told, not refused.
	"Service": {
		"provider":    "drover registers every service in its own catalog (its API and DNS), as Nomad's provider \"nomad\" does; provider does nothing",
		"canary_tags": "canary_tags are not applied: a canary is registered with the service's tags, like every other instance",
		"on_update":   "on_update is not applied: every check of the service counts towards a deployment's health (on_update = \"require_healthy\")",
	},
	"Check":          {"on_update": "on_update is not applied: the check counts towards a deployment's health (on_update = \"require_healthy\")"},
	"Scaling":        {"policy": "drover has no autoscaler: the policy is for one such as the Nomad Autoscaler, and drover does not keep it; min and max bound every count (drover job scale)"},
	"Task":           {"scaling": "drover does not resize a task's resources (Nomad Enterprise's dynamic application sizing); the block does nothing"},
	"UpdateStrategy": {"stagger": "drover paces a rollout by each batch's health (min_healthy_time), not by a fixed pause; stagger does nothing"},
	// The docker driver's keys drover does not apply.
	"TaskConfig": {
		"auth":           "drover does not pass registry credentials from the job: the node's docker daemon pulls with its own (docker login on the node); auth does nothing",
		"auth_soft_fail": "drover does not pass registry credentials from the job, so there is no auth to fail; auth_soft_fail does nothing",
		"ipc_mode":       "drover does not set a task's IPC namespace: exec and raw_exec tasks share the node's (as ipc_mode = \"host\" asks), docker containers get docker's default; ipc_mode does nothing",
		"logging":        "drover reads the container's output through the daemon into its own task logs (drover logs); logging's driver and options are not applied, the daemon's default log driver is used",
	},
	// Nomad's options of CSI volumes and of mount propagation.
	"VolumeRequest": {
		"mount_options": "drover has no CSI: mount_options (fs_type, mount_flags) apply to CSI volumes only and do nothing here",
		"sticky":        "sticky does nothing: a host volume is the node's own directory, so a replacement on the same node finds it as it was",
	},
	"VolumeMount": {
		"propagation_mode": "propagation_mode is not applied: a host volume is mounted with private propagation",
		"selinux_label":    "selinux_label is not applied: drover does not relabel a host volume",
	},
	"DockerMount": {
		"bind_options":   "bind_options are not applied: the bind mount uses docker's default propagation (rprivate)",
		"volume_options": "volume_options are not applied: a volume mount uses an existing docker volume, or docker makes one with its default driver",
		"tmpfs_options":  "tmpfs_options are not applied: the tmpfs has docker's default size (half the node's memory) and mode",
	},
}

// otherDrivers are task drivers of Nomad's that drover does not have. A
// task on another driver that is close to one of drover's ("dockr") is
// taken for a typo and refused; one of these ("exec2") is accepted with a
// warning, and never placed.
var otherDrivers = []string{"exec2", "java", "qemu", "podman", "containerd-driver", "nspawn", "lxc", "singularity", "ecs", "rkt", "pot", "iis"}
