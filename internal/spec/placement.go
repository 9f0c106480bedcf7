package spec

import (
	"fmt"
	"strings"
	"time"
)

// PlacementFailure says why some instances of a group could not be placed,
// per dimension, in a form a person reads in `drover status`:
//
//	0/5 nodes fit: missing driver docker on 2; memory exhausted on 3 (need 900 MB, most free 512 MB)
//	0/10 nodes fit: constraint ${meta.rack} set_contains_any r1,r2 not met on 6; memory exhausted on 4 (need 900 MB, most free 512 MB)
type PlacementFailure struct {
	Group string `json:"group"`
	// Missing is how many instances are waiting for a place.
	Missing int `json:"missing"`
	// NodesEvaluated is how many nodes were considered; none of them fit.
	NodesEvaluated int                `json:"nodes_evaluated"`
	Dimensions     []DimensionFailure `json:"dimensions,omitempty"`
	// Hints are the smallest changes that would make an instance fit:
	// "fits 3 nodes if memory <= 900 MB".
	Hints []string `json:"hints,omitempty"`
	// NoNodeMatched: the group is a system job's, and no node may run it
	// (none is ready, eligible, with its drivers and meeting its
	// constraints), so nothing is placed and Missing is 0; Dimensions
	// count the nodes by the first thing that rules each out.
	NoNodeMatched bool `json:"no_node_matched,omitempty"`

	// Text and NeverFits are String() (without the hints) and Never() in
	// the API's answers, for the web UI, which shows a failure as drover
	// status does; Shown writes them, nothing stores them.
	Text      string `json:"text,omitempty"`
	NeverFits bool   `json:"never,omitempty"`
}

// Shown is f with its words written for the API's readers that are not Go
// (Text and NeverFits, and each dimension's Text and TooSmall). f is left
// as it was: it may be the store's, shared by every reader.
func (f PlacementFailure) Shown() PlacementFailure {
	c := f
	c.Hints = nil
	c.Text = c.String()
	c.Hints = f.Hints
	c.NeverFits = f.Never()
	c.Dimensions = make([]DimensionFailure, len(f.Dimensions))
	for i, d := range f.Dimensions {
		d.Text = d.String()
		d.TooSmall = d.TooLarge()
		c.Dimensions[i] = d
	}
	return c
}

// ShownFailures is Shown of each of fs, in a new list.
func ShownFailures(fs []PlacementFailure) []PlacementFailure {
	if fs == nil {
		return nil
	}
	out := make([]PlacementFailure, len(fs))
	for i, f := range fs {
		out[i] = f.Shown()
	}
	return out
}

// Dimensions of a placement failure for nodes an operator took out of
// scheduling: a node that is ready but draining (`drover node drain`), or
// marked ineligible (`drover node eligibility NODE off`). They read
// "draining on 2", "ineligible on 1" in a failure, as DimensionNotReady (a
// node that is down) reads "not ready on 1".
const (
	DimensionNotReady   = "status"
	DimensionDraining   = "draining"
	DimensionIneligible = "ineligible"
)

// DriverDimension is the dimension of the nodes that lack driver d.
func DriverDimension(d string) string { return "driver " + d }

// DimensionNetworkMode starts the dimension of the nodes that cannot run a
// group's network mode (their agent cannot make network namespaces, a
// bridge or nftables rules): "network mode bridge".
const DimensionNetworkMode = "network mode "

// NetworkModeDimension is the dimension of the nodes that lack network
// mode m.
func NetworkModeDimension(m string) string { return DimensionNetworkMode + m }

// ConstraintDimension is the dimension of the nodes that do not meet c;
// valid is false when c does not compile, and then no node meets it.
func ConstraintDimension(c Constraint, valid bool) string {
	d := "constraint " + c.String()
	if !valid {
		d += " (invalid)"
	}
	return d
}

// DimensionFailure counts the nodes that ruled themselves out for one reason.
type DimensionFailure struct {
	// Dimension is "cpu", "memory", "disk", "driver <name>", "network
	// mode <mode>", "status",
	// "unregistered" (a pinned request's node is not known),
	// "port <n>" (a static port in use), "dynamic ports", "datacenter
	// <the job's datacenters>", "node pool <the job's pool>", "conflict" (a
	// job already on the node rules this one out), or "constraint
	// <attribute> <operator> <value>" (the parts that are set).
	Dimension string `json:"dimension"`
	Nodes     int    `json:"nodes"`
	// Need and MostFree are set for resource dimensions, in Unit: what
	// one instance needs and the most any of these nodes has free.
	// Largest is set only when none of them could take it even empty:
	// the most any of them has in all, less than Need.
	Need     int    `json:"need,omitempty"`
	MostFree int    `json:"most_free,omitempty"`
	Largest  int    `json:"largest,omitempty"`
	Unit     string `json:"unit,omitempty"`
	// Text and TooSmall are String() and TooLarge() in the API's answers
	// (PlacementFailure.Shown writes them).
	Text     string `json:"text,omitempty"`
	TooSmall bool   `json:"too_small,omitempty"`
}

// TooLarge says the nodes were ruled out because one instance needs more
// of a resource than any of them has in all, free or not.
func (d DimensionFailure) TooLarge() bool { return d.Unit != "" && d.Largest > 0 }

// permanent says the nodes counted are ruled out whatever runs on them:
// they lack a driver, are outside the job's datacenters or pool, or are
// too small. Constraints are not counted here: some (distinct_hosts,
// conflicts) depend on what else is placed.
func (d DimensionFailure) permanent() bool {
	_, _, volume := hostVolumeOf(d.Dimension)
	return d.TooLarge() || strings.HasPrefix(d.Dimension, "driver ") || volume || strings.HasPrefix(d.Dimension, DimensionNetworkMode) ||
		strings.HasPrefix(d.Dimension, DimensionDatacenter) || strings.HasPrefix(d.Dimension, DimensionNodePool)
}

// Never says that no node there is now could take an instance, whatever
// else ran or stopped: each node was ruled out for a permanent reason.
// Only a new node, or a change of the job, helps.
func (f PlacementFailure) Never() bool {
	if f.NodesEvaluated == 0 || len(f.Dimensions) == 0 {
		return false
	}
	for _, d := range f.Dimensions {
		if !d.permanent() {
			return false
		}
	}
	return true
}

// Dimensions of the nodes a job does not run on whatever they hold
// (Job.Excluded): outside its datacenters, or in another node pool. The
// job's own values follow: "datacenter dc2 or dc3", "node pool gpu".
const (
	DimensionDatacenter = "datacenter "
	DimensionNodePool   = "node pool "
)

func (d DimensionFailure) String() string {
	switch {
	case strings.HasPrefix(d.Dimension, DimensionDatacenter), strings.HasPrefix(d.Dimension, DimensionNodePool):
		return fmt.Sprintf("not in %s on %d", d.Dimension, d.Nodes)
	case strings.HasPrefix(d.Dimension, "driver "), strings.HasPrefix(d.Dimension, DimensionNetworkMode):
		return fmt.Sprintf("missing %s on %d", d.Dimension, d.Nodes)
	case strings.HasPrefix(d.Dimension, dimensionHostVolume):
		name, readOnly, _ := hostVolumeOf(d.Dimension)
		if readOnly {
			return fmt.Sprintf("host volume %s is read-only on %s", name, plural(d.Nodes, "node"))
		}
		return fmt.Sprintf("missing host volume %s on %d", name, d.Nodes)
	case strings.HasPrefix(d.Dimension, "constraint "):
		return fmt.Sprintf("%s not met on %d", d.Dimension, d.Nodes)
	case d.Dimension == DimensionNotReady:
		return fmt.Sprintf("not ready on %d", d.Nodes)
	case d.Dimension == "unregistered":
		return fmt.Sprintf("%d pinned node(s) not registered", d.Nodes)
	case strings.HasPrefix(d.Dimension, "port "):
		return fmt.Sprintf("%s in use on %d", d.Dimension, d.Nodes)
	case d.Dimension == "dynamic ports":
		return fmt.Sprintf("dynamic ports exhausted on %d", d.Nodes)
	case d.Dimension == "conflict":
		return fmt.Sprintf("conflicts with a job already there on %d", d.Nodes)
	case d.TooLarge():
		return fmt.Sprintf("%s too small on %d (need %d %s, the largest has %d %s in all)", d.Dimension, d.Nodes, d.Need, d.Unit, d.Largest, d.Unit)
	case d.Unit != "":
		return fmt.Sprintf("%s exhausted on %d (need %d %s, most free %d %s)", d.Dimension, d.Nodes, d.Need, d.Unit, d.MostFree, d.Unit)
	}
	return fmt.Sprintf("%s on %d", d.Dimension, d.Nodes)
}

func (f PlacementFailure) String() string {
	var b strings.Builder
	if f.NoNodeMatched {
		fmt.Fprintf(&b, "no node matches: 0/%d nodes eligible", f.NodesEvaluated)
	} else {
		fmt.Fprintf(&b, "0/%d nodes fit", f.NodesEvaluated)
	}
	if f.NodesEvaluated == 0 && len(f.Dimensions) == 0 {
		b.WriteString(": no ready nodes")
	}
	for i, d := range f.Dimensions {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if drv, ok := strings.CutPrefix(d.Dimension, "driver "); ok && d.Nodes == f.NodesEvaluated {
			// Not one node has it: a driver drover lacks (podman), or
			// one no agent enabled.
			fmt.Fprintf(&b, "no node has driver %s", drv)
			continue
		}
		if vol, readOnly, ok := hostVolumeOf(d.Dimension); ok && !readOnly && d.Nodes == f.NodesEvaluated {
			fmt.Fprintf(&b, "no node has host volume %s", vol)
			continue
		}
		if m, ok := strings.CutPrefix(d.Dimension, DimensionNetworkMode); ok && d.Nodes == f.NodesEvaluated {
			fmt.Fprintf(&b, "no node supports network mode %s", m)
			continue
		}
		b.WriteString(d.String())
	}
	for _, h := range f.Hints {
		b.WriteString("; hint: ")
		b.WriteString(h)
	}
	return b.String()
}

// JobSchedule is the leader's record of what it could not do for a job's
// current version: the groups with instances still waiting for a place.
// It is empty when everything is placed.
type JobSchedule struct {
	Job        string             `json:"job"`
	JobVersion uint64             `json:"job_version"`
	Failures   []PlacementFailure `json:"failures,omitempty"`
	UpdateTime time.Time          `json:"update_time"`
}
