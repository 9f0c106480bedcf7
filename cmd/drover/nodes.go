package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func newNodesCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "nodes [NODE]",
		Short: "List machines with their status, drivers and what is allocated on them, or show one",
		Long: `Nodes lists the machines. Given NODE (a node ID, a unique ID prefix or a
name), it shows that one: its datacenter, class and pool, its capacity,
every attribute and meta key constraints can read, as ${attr.<name>} and
${meta.<key>}, and the instances that run there.`,
		Example: "  drover nodes\n  drover nodes node-a\n  drover nodes -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if len(args) == 1 {
				n, err := c.Node(ctx, args[0])
				if err != nil {
					return err
				}
				if g.output != "table" {
					return g.print(cmd.OutOrStdout(), n)
				}
				allocs, _, err := c.Allocs(ctx, "", n.ID, nil)
				if err != nil {
					return err
				}
				printNode(cmd.OutOrStdout(), n)
				printNodeAllocs(cmd.OutOrStdout(), allocs, time.Now())
				return nil
			}
			nodes, _, err := c.Nodes(ctx, nil)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), nodes)
			}
			if len(nodes) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No nodes. Start one with drover agent, or use drover dev.")
				return nil
			}
			allocs, _, err := c.Allocs(ctx, "", "", nil)
			if err != nil {
				return err
			}
			used := map[string]spec.Resources{}
			count := map[string]int{}
			for _, a := range allocs {
				if !a.Terminal() {
					used[a.NodeID] = used[a.NodeID].Add(a.Resources)
					count[a.NodeID]++
				}
			}
			var ready []string
			for _, n := range nodes {
				if n.Status == spec.NodeReady {
					ready = append(ready, n.ID)
				}
			}
			usage := fetchUsage(ctx, c, ready)
			// CPU and MEMORY are reserved/capacity; USED is what the
			// node's tasks use now, as its agent measures them. STATUS
			// says whether an operator took the node out of scheduling
			// (drover node eligibility, drover node drain).
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "STATUS", "DRIVERS", "CPU (MHz)", "USED CPU", "MEMORY (MB)", "USED MEM", "ALLOCS")
			for _, n := range nodes {
				u := used[n.ID]
				usedCPU, usedMem := "-", "-"
				nu := usage[n.ID]
				if nu == nil && n.Status == spec.NodeReady {
					nu = n.Usage // the agent's last report, when it does not answer now
				}
				if nu != nil {
					usedCPU, usedMem = strconv.Itoa(nu.Tasks.CPU), strconv.Itoa(nu.Tasks.MemoryMB)
				}
				t.row(short(n.ID), n.Name, nodeStatus(n), strings.Join(n.Drivers, ","),
					fmt.Sprintf("%d/%d", u.CPU, n.Resources.CPU), usedCPU,
					fmt.Sprintf("%d/%d", u.MemoryMB, n.Resources.MemoryMB), usedMem,
					strconv.Itoa(count[n.ID]))
			}
			t.flush()
			return nil
		},
	}, documents...)
}

// printNode shows one node: who and where it is, what it holds, and what
// constraints can read of it, under the names they use.
func printNode(w io.Writer, n *spec.Node) {
	t := newTable(w, "ID", n.ID)
	for _, kv := range [][2]string{
		{"Name", n.Name}, {"Status", nodeStatus(n)},
		{"Datacenter", n.DatacenterOf()}, {"Class", dash(n.NodeClass)}, {"Pool", n.PoolOf()},
		{"Address", dash(n.Address)}, {"Drivers", strings.Join(n.Drivers, ",")},
		{"Volumes", dash(hostVolumesLine(n.HostVolumes))},
		{"CPU", fmt.Sprintf("%d MHz", n.Resources.CPU)}, {"Memory", fmt.Sprintf("%d MB", n.Resources.MemoryMB)},
		{"Disk", fmt.Sprintf("%d MB", n.Resources.DiskMB)},
	} {
		t.row(kv[0], kv[1])
	}
	t.flush()
	for _, sec := range []struct {
		title, prefix string
		m             map[string]string
	}{{"Attributes", "attr.", n.Published()}, {"Meta", "meta.", n.Meta}} {
		fmt.Fprintln(w)
		t := newTable(w, sec.title)
		if len(sec.m) == 0 {
			t.row("  (none)")
		}
		for _, k := range slices.Sorted(maps.Keys(sec.m)) {
			t.row("  "+sec.prefix+k, sec.m[k])
		}
		t.flush()
	}
}

// hostVolumesLine lists a node's host volumes: "certs (read-only), shared".
func hostVolumesLine(vs []spec.HostVolume) string {
	var names []string
	for _, v := range vs {
		if v.ReadOnly {
			names = append(names, v.Name+" (read-only)")
		} else {
			names = append(names, v.Name)
		}
	}
	return strings.Join(names, ", ")
}

// printNodeAllocs lists the instances of a node that are not over, and
// counts those that are (drover ps --all lists them).
func printNodeAllocs(w io.Writer, allocs []*spec.Alloc, now time.Time) {
	var live []*spec.Alloc
	over := 0
	for _, a := range allocs {
		if a.Terminal() {
			over++
		} else {
			live = append(live, a)
		}
	}
	fmt.Fprintln(w)
	if len(live) == 0 {
		fmt.Fprintln(w, "Allocations: none running")
	} else {
		fmt.Fprintln(w, "Allocations")
		printAllocTable(w, live, now, true)
	}
	if over > 0 {
		fmt.Fprintf(w, "(and %d finished; drover ps --all lists them)\n", over)
	}
}

// usageTimeout bounds each node's usage request: usage is a glance, and a
// node that does not answer shows "-" rather than holding the listing.
const usageTimeout = 2 * time.Second

// usageFetches bounds how many nodes are asked at once.
const usageFetches = 8

// fetchUsage asks the nodes for what their tasks use, concurrently. A node
// that does not answer in time is left out of the result.
func fetchUsage(ctx context.Context, c *client.Client, nodeIDs []string) map[string]*spec.NodeUsage {
	var mu sync.Mutex
	out := map[string]*spec.NodeUsage{}
	slots := make(chan struct{}, usageFetches)
	var wg sync.WaitGroup
	for _, id := range nodeIDs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			uctx, cancel := context.WithTimeout(ctx, usageTimeout)
			defer cancel()
			nu, err := c.NodeUsage(uctx, id)
			if err != nil {
				return
			}
			mu.Lock()
			out[id] = nu
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
