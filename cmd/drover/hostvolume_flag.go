package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/flagfile"
)

// hostVolumes is --host-volume NAME=PATH[:ro], repeatable; in a config
// file host_volume = ["data=/srv/data"], or Nomad's client form
// host_volume "data" { path = "/srv/data", read_only = true }.
type hostVolumes struct {
	vols []agent.HostVolume
	set  bool
}

var _ flagfile.BlockListValue = (*hostVolumes)(nil)

func (h *hostVolumes) add(fs *pflag.FlagSet) {
	fs.Var(h, "host-volume", "offer a directory of this machine to jobs as host volume NAME (a group's volume \"x\" { source = \"NAME\" }; NAME[N], such as data[0], is instance N's of a per_alloc volume), read-only with :ro (repeatable)")
}

func (h *hostVolumes) Set(s string) error {
	v, err := agent.ParseHostVolume(s)
	if err != nil {
		return err
	}
	if !h.set {
		h.vols, h.set = nil, true
	}
	h.vols = append(h.vols, v)
	return nil
}

func (h *hostVolumes) Type() string { return "NAME=PATH[:ro]" }

func (h *hostVolumes) String() string { return "[" + strings.Join(h.GetSlice(), ",") + "]" }

func (h *hostVolumes) Append(s string) error { return h.Set(s) }

func (h *hostVolumes) Replace(list []string) error {
	var out []agent.HostVolume
	for _, s := range list {
		v, err := agent.ParseHostVolume(s)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	h.vols, h.set = out, true
	return nil
}

func (h *hostVolumes) GetSlice() []string {
	out := make([]string, len(h.vols))
	for i, v := range h.vols {
		out[i] = v.String()
	}
	return out
}

// BlockElement reads Nomad's host_volume "name" { path, read_only }.
func (h *hostVolumes) BlockElement(name string, attrs map[string]string) (string, error) {
	v := agent.HostVolume{Name: name, Path: attrs["path"]}
	for k, text := range attrs {
		switch k {
		case "path":
		case "read_only":
			ro, err := strconv.ParseBool(text)
			if err != nil {
				return "", fmt.Errorf("read_only = %q: want true or false", text)
			}
			v.ReadOnly = ro
		default:
			return "", fmt.Errorf("unknown attribute %q; a host_volume block takes path and read_only", k)
		}
	}
	if v.Path == "" {
		return "", fmt.Errorf("no path: write path = \"/srv/%s\", the directory to offer", name)
	}
	return v.String(), nil
}

// list is the volumes as given, for the agent.
func (h *hostVolumes) list() []agent.HostVolume { return slices.Clone(h.vols) }
