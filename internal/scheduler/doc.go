// Package scheduler decides where new allocations go: given a snapshot of
// the nodes, the allocations already on them, and a list of instances to
// place, Place returns a node (and host ports) for each instance that
// fits, the lower-priority allocs to evict when preemption makes room, and
// for each group whose instances do not fit a PlacementFailure that says
// why, per dimension, with hints, in words a person reads in `drover
// status` and `drover plan`.
//
// Placement is feasibility -> rank -> select, per group:
//
//	feasible  the node is eligible (ready, not marked ineligible, not
//	          draining: spec.Node.Eligible), has every driver the group needs, meets
//	          every constraint of the job, the group and its tasks, has
//	          the group's static ports free and room for its dynamic ones,
//	          and its free cpu, memory and disk cover the group's
//	          resources; distinct_hosts, distinct_property, colocate and
//	          conflicts count the live allocs and the placements made
//	          earlier in the same call
//	rank      score = base + affinity + spread, each described below
//	select    the highest score; on an exact tie the higher score
//	          before the spread term (two that differ in the last place
//	          can round to the same sum once it is added), then the
//	          smaller node ID: one total order (beats) that every path
//	          (heaps, cold picks) follows; a request's AvoidNode (the
//	          node a failed instance ran on) is chosen only when no
//	          other node is feasible
//
// base, from the node's use u_r = used_r / total_r of each resource r
// after the placement (r is cpu and memory, and disk when the group asks
// for disk; a resource a node has none of counts as full), by the job's
// scoring:
//
//	binpack (default)  mean_r u_r                       fill nodes up, keep others empty
//	least_loaded       1 - mean_r u_r                   fleet's rule: the emptiest node
//	epvm               1 - sum_r (N^u_r - N^u'_r) / (R (N-1))
//	                   Cube's and Borg's E-PVM: u'_r is the use before the
//	                   placement, N the number of eligible nodes, R the number
//	                   of resources; the exponential cost grows fastest on
//	                   a resource that is already busy, so it favours the
//	                   node where the instance raises no resource far
//
// affinity, in [-1, 1]: the sum of the weights of the group's affinities
// that the node matches, over the sum of their absolute weights.
//
// spread, in [-1, 1]: for each spread s with weight w_s (normalised to sum
// 1) and the node's value v of its attribute, w_s * (want_v - have_v) /
// want_v, clamped, where have_v counts the group's instances at value v
// and want_v = count * percent_v / 100. A value without a target gets an
// even share of what the targets leave; an even spread (no targets) shares
// 100% over the values of the nodes that could hold the group. A node
// without the attribute, or a value due nothing, scores -1.
//
// Preemption: a request that fits nowhere may evict instances of jobs at
// least PreemptGap below its priority, when its job allows it (Job.Preempt,
// on by default for system jobs), and instances of the jobs its replaces
// rules name. See groupRun.preempt for the choice.
//
// The package is pure: Place reads only its Input and returns a Result. It
// does no I/O, reads no clock and draws no random numbers, so the same
// snapshot always yields the same plan. That is what lets the leader's loop
// around it stay thin, what lets `drover plan` show exactly what the leader
// would do, and what lets the tests compare a fast placer with an obvious
// one on random inputs.
//
// How it is fast: when a group's first request comes up, the eligible nodes
// of the driver classes it needs go into max-heaps by score, one per
// spread partition (nodes with the same spread values). Constraints are
// evaluated lazily, on the node at the top of a heap, and a node that
// fails anything but AvoidNode is dropped for the rest of the group's
// requests: within a call use only grows, so it cannot fit later. A
// placement then costs a heap fix and a comparison per partition, and a
// call costs O(nodes) once per group plus O(log nodes) per placement.
//
// The O(nodes) part is reading every node once per call, and on a large
// cluster it dominates a call that places few instances. A Cache, which
// the leader keeps across its passes, removes it: the node index and the
// heaps (and spread partitions) of groups without distinct_* or job rules
// stay built, each
// call is undone on them at its end, and the next call rescores only the
// nodes whose allocs changed. Results are identical with and without it.
//
// A group shape the Cache has not seen would still score every node once
// to build its heaps. For binpack and least_loaded it does not: nodes with the same capacity (the same totals)
// rank in the same order for every ask, since the ask adds the same
// need_r/total_r to each of them. The Cache keeps, per driver class and
// capacity, the nodes in buckets of equal use under a segment tree that
// gives each subtree's highest and lowest sum of use fractions and its
// most free room per dimension (useOrder), shape-independent and updated
// per node whenever a node's use changes. A group's first coldPicks
// placements of a call walk those trees best-first (coldPick): subtrees
// without room for the ask are skipped, a bucket's nodes are checked in
// ID order, lazily as from the heaps, and the walk stops when no subtree
// left may beat the best feasible node found. That node is the one the
// heaps would give (the bounds are allowed a slack of 1e-9 for rounding;
// nodes within it are scored exactly). A group that places more builds
// its heaps then. Affinities and spreads add a term that depends on the
// node's attributes (and for a spread on where the group's instances
// are): the subtree bounds add the highest such term the group can give
// now, and a bucket's nodes are scored exactly, in ID order, until no
// later one can beat the best. An even spread's share needs the values
// of the nodes that could hold the group: they come from an index of the
// attribute's values kept with the Cache (attrIndex). How many of the
// group's instances each value holds comes from the Cache as well: it
// keeps each group's live allocs and, per spread attribute, their count
// per value of their nodes, counted on the group's first spread
// placement and updated as allocs come, go and end (liveSpread), so a
// call pays for the allocs that changed and those its plan stops, not
// for every live alloc. Without a Cache a call counts them from its
// allocs, as the heaps always did. E-PVM's cost weighs
// each dimension by the ask, so its order changes with the shape: such
// groups, and calls without a Cache, build heaps as before.
package scheduler
