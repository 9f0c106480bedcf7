package jobfile

import (
	"fmt"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// warnNodeTargets warns, at the line that names it, of each node attribute
// or meta key that the job's constraints, affinities and spreads read, or
// its tasks interpolate (spec.Job.NodeTargets), and that no node has: an
// attribute no drover node publishes, or, when the cluster's nodes are
// known (c.nodeHas, drover plan), one none of them has. These are
// warnings, not problems: a node may have it later, and a constraint
// with != or is_not_set still matches.
func warnNodeTargets(job *spec.Job, c *collector, at positions) {
	for _, r := range job.NodeTargets() {
		published := spec.Fingerprinted(r.Name)
		if published && (c.nodeHas == nil || c.nodeHas(r.Name)) {
			continue
		}
		// A constraint, affinity or spread names its target in its
		// attribute field; any other field interpolates it.
		placement := strings.HasSuffix(r.Field, ".attribute")
		so := "so it is left as written: the task sees the text ${" + r.Name + "}"
		if placement {
			so = "so no node matches it but with != or is_not_set"
		}
		why := "is not an attribute drover nodes publish (docs/nomad.md lists those they do)"
		switch {
		case published:
			why = "is on no current node (drover nodes NODE shows a node's attributes and meta)"
		case strings.HasPrefix(r.Name, "attr.consul."):
			why = "is Consul's, and drover works without Consul (its own catalog): no node publishes it"
		case strings.HasPrefix(r.Name, "attr.vault."):
			why = "is Vault's, and drover works without Vault (no secrets store): no node publishes it"
		}
		msg := fmt.Sprintf("${%s} %s, %s", r.Name, why, so)
		if !published && placement && (strings.HasPrefix(r.Name, "attr.consul.") || strings.HasPrefix(r.Name, "attr.vault.")) {
			msg += "; remove it"
		}
		c.warnField(at.lookup(r.Field), r.Field, "%s", msg)
	}
}
