package spec

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Host volumes, as Nomad's: an agent declares directories of its machine
// by name (`drover agent --host-volume data=/srv/data[:ro]`), its node
// record publishes the names (HostVolume), a group asks for one by name
// (VolumeRequest, `volume "x" { type = "host", source = "data" }`), and
// each task mounts the group's volumes it names (VolumeMount,
// `volume_mount { volume = "x", destination = "/data" }`). The group is
// placed only on nodes that have each host volume it asks for, writable
// when it asks for it writable. With per_alloc, instance N of the group
// uses host volume Source[N] instead ("data[0]", "data[1]"): each instance
// has its own, and goes only where it is.

// HostVolume is one host volume a node offers: its name, and whether the
// agent declared it read-only. The directory's path stays with the agent.
type HostVolume struct {
	Name     string `json:"name"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// HostVolume returns the node's host volume called name, and whether it
// has one.
func (n *Node) HostVolume(name string) (HostVolume, bool) {
	for _, v := range n.HostVolumes {
		if v.Name == name {
			return v, true
		}
	}
	return HostVolume{}, false
}

// The types of a group's volume; "" is VolumeHost.
const (
	VolumeHost = "host"
	VolumeCSI  = "csi"
)

// VolumeRequest is a group's volume block: a name its tasks' volume_mount
// blocks use, and the host volume (Source) it is. A CSI volume is
// accepted and attaches nothing: drover has no CSI.
type VolumeRequest struct {
	Name     string `json:"name" hcl:",label"`
	Type     string `json:"type,omitempty"`
	Source   string `json:"source"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// PerAlloc: instance N uses host volume Source[N] (PerAllocSource),
	// not Source; host volumes only.
	PerAlloc bool `json:"per_alloc,omitempty"`
	// AccessMode and AttachmentMode are Nomad's, taken so its files
	// decode; they only matter to CSI, and do nothing here.
	AccessMode     string `json:"access_mode,omitempty"`
	AttachmentMode string `json:"attachment_mode,omitempty"`
}

// TypeOf is the volume's type, VolumeHost when unset.
func (v *VolumeRequest) TypeOf() string {
	if v.Type == "" {
		return VolumeHost
	}
	return v.Type
}

// SourceFor is the host volume instance index of the group uses for v:
// Source, or Source[index] when v is per_alloc.
func (v *VolumeRequest) SourceFor(index int) string {
	if v.PerAlloc {
		return PerAllocSource(v.Source, index)
	}
	return v.Source
}

// PerAllocSource is the name of instance index's own host volume of a
// per_alloc volume with source: "data[2]", as in Nomad.
func PerAllocSource(source string, index int) string {
	return fmt.Sprintf("%s[%d]", source, index)
}

// CheckHostVolumeName reports what is wrong with the name of a host
// volume a node offers: a name (CheckName), or one followed by an
// instance index in brackets ("data[0]"), which per_alloc volumes ask
// for. "" when it is fine.
func CheckHostVolumeName(s string) string {
	base, index, ok := strings.Cut(s, "[")
	if !ok {
		return CheckName(s)
	}
	if msg := CheckName(base); msg != "" {
		return msg
	}
	digits, ok := strings.CutSuffix(index, "]")
	if n, err := strconv.Atoi(digits); !ok || err != nil || n < 0 || strconv.Itoa(n) != digits {
		return fmt.Sprintf("%q has a bracket that is not an instance index; write NAME or NAME[N] with N a number such as 0, the host volume of a per_alloc volume's instance N", s)
	}
	return ""
}

// VolumeMount is a task's volume_mount block: the group volume Volume at
// Destination, read-only when ReadOnly or the volume is.
type VolumeMount struct {
	Volume      string `json:"volume"`
	Destination string `json:"destination"`
	ReadOnly    bool   `json:"read_only,omitempty"`
}

// Volume returns the group's volume called name, or nil.
func (g *Group) Volume(name string) *VolumeRequest {
	for _, v := range g.Volumes {
		if v != nil && v.Name == name {
			return v
		}
	}
	return nil
}

// HostVolumeNeed is one host volume a group needs on its node.
type HostVolumeNeed struct {
	Name string
	// PerAlloc: each instance needs its own, Name[N] (For).
	PerAlloc bool
	// Write: some volume block asks for it read-write.
	Write bool
}

// For is the host volume instance index needs: Name, or Name[index] when
// the need is per_alloc.
func (n HostVolumeNeed) For(index int) string {
	if n.PerAlloc {
		return PerAllocSource(n.Name, index)
	}
	return n.Name
}

// HostVolumeNeeds returns the host volumes the group's instances need on
// their node, by source and then per_alloc, sorted: a node without one of
// them, or with one read-only that a need writes, cannot take the
// instance.
func (g *Group) HostVolumeNeeds() []HostVolumeNeed {
	var out []HostVolumeNeed
	for _, v := range g.Volumes {
		if v == nil || v.TypeOf() != VolumeHost || v.Source == "" {
			continue
		}
		i := slices.IndexFunc(out, func(n HostVolumeNeed) bool { return n.Name == v.Source && n.PerAlloc == v.PerAlloc })
		if i < 0 {
			out = append(out, HostVolumeNeed{Name: v.Source, PerAlloc: v.PerAlloc})
			i = len(out) - 1
		}
		out[i].Write = out[i].Write || !v.ReadOnly
	}
	slices.SortFunc(out, func(a, b HostVolumeNeed) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 || a.PerAlloc == b.PerAlloc {
			return c
		}
		if b.PerAlloc {
			return -1 // the shared one first
		}
		return 1
	})
	return out
}

// HostVolumeDimension is the placement failure dimension of the nodes
// that lack host volume name; HostVolumeReadOnlyDimension of those that
// have it read-only where the group writes it.
func HostVolumeDimension(name string) string { return dimensionHostVolume + name }

// HostVolumeReadOnlyDimension: see HostVolumeDimension.
func HostVolumeReadOnlyDimension(name string) string {
	return dimensionHostVolume + name + dimensionReadOnly
}

const (
	dimensionHostVolume = "host volume "
	dimensionReadOnly   = " read-only"
)

// hostVolumeOf reads a host volume dimension: the volume's name, whether
// it is the read-only one, and whether d is one at all.
func hostVolumeOf(d string) (name string, readOnly, ok bool) {
	name, ok = strings.CutPrefix(d, dimensionHostVolume)
	if !ok {
		return "", false, false
	}
	name, readOnly = strings.CutSuffix(name, dimensionReadOnly)
	return name, readOnly, true
}

// VolumeMountReadOnly reports whether mount m of group g is read-only:
// the mount says so, or its volume does, or the volume is not there.
func (g *Group) VolumeMountReadOnly(m *VolumeMount) bool {
	v := g.Volume(m.Volume)
	return m.ReadOnly || v == nil || v.ReadOnly
}

// validateVolumes checks a group's volume blocks and its tasks'
// volume_mount blocks.
func validateVolumes(ps *Problems, p string, g *Group) {
	var seen map[string]bool
	for i, v := range g.Volumes {
		vp := fmt.Sprintf("%s.volumes[%d]", p, i)
		if v == nil {
			ps.Add(vp, "volume is null")
			continue
		}
		switch {
		case v.Name == "":
			ps.Add(vp+".name", "volume needs a name: write volume \"data\" { ... }")
		case seen[v.Name]:
			ps.Add(vp+".name", "group %q declares volume %q twice; give each volume block its own name", g.Name, v.Name)
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[v.Name] = true
		switch v.TypeOf() {
		case VolumeHost:
			if v.Source == "" {
				ps.Add(vp+".source", "volume %q needs a source: the name of a host volume declared on the nodes (drover agent --host-volume NAME=PATH)", v.Name)
			}
		case VolumeCSI:
			if v.PerAlloc {
				ps.Add(vp+".per_alloc", "volume %q: per_alloc applies to host volumes only (instance N mounts host volume SOURCE[N]), and drover has no CSI; remove per_alloc, or use type = \"host\" with host volumes named %s[0], %s[1], ... on the nodes", v.Name, v.Source, v.Source)
			}
		default:
			ps.Add(vp+".type", "volume %q has type %q; use \"host\" (a node's host volume) or \"csi\"", v.Name, v.Type)
		}
	}
	for j, t := range g.Tasks {
		if t == nil {
			continue
		}
		for k, m := range t.VolumeMounts {
			mp := fmt.Sprintf("%s.tasks[%d].volume_mounts[%d]", p, j, k)
			if m == nil {
				ps.Add(mp, "volume_mount is null")
				continue
			}
			if g.Volume(m.Volume) == nil {
				hint := "declare it in the group: volume \"" + m.Volume + "\" { type = \"host\", source = \"NAME\" }"
				if len(g.Volumes) > 0 {
					var names []string
					for _, v := range g.Volumes {
						if v != nil {
							names = append(names, fmt.Sprintf("%q", v.Name))
						}
					}
					hint = "the group declares " + strings.Join(names, ", ") + "; name one of them, or " + hint
				}
				ps.Add(mp+".volume", "task %q mounts volume %q, which group %q does not declare; %s", t.Name, m.Volume, g.Name, hint)
			}
			switch {
			case m.Destination == "":
				ps.Add(mp+".destination", "volume_mount of %q needs a destination: where the task sees the volume, such as \"/data\" or \"local/data\"", m.Volume)
			case strings.Contains(m.Destination, ".."):
				ps.Add(mp+".destination", "volume_mount destination %q must not hold \"..\"", m.Destination)
			case path.Clean(m.Destination) == "/":
				ps.Add(mp+".destination", "volume_mount destination %q would hide the whole file system; mount it at a directory such as \"/data\"", m.Destination)
			}
		}
	}
}

// plural writes "1 node", "3 nodes".
func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
