// Package scheduler decides where new allocations go: given a snapshot of
// the nodes, the allocations already on them, and a list of instances to
// place, Place returns a node for each instance that fits, and for each
// group whose instances do not fit a PlacementFailure that says why, per
// dimension, in words a person reads in `drover status`.
//
// Placement is feasibility -> rank -> select:
//
//	feasible  the node is ready, has every driver the group needs, meets
//	          every constraint of the job, the group and its tasks, and
//	          its free cpu and memory cover the group's resources;
//	          distinct_hosts and distinct_property count the group's live
//	          allocs and the placements made earlier in the same call
//	rank      load = (usedCPU/totalCPU + usedMem/totalMem) / 2
//	select    the least loaded feasible node; ties go to the smaller node ID;
//	          a request's AvoidNode (the node a failed instance ran on) is
//	          chosen only when no other node is feasible
//
// The package is pure: Place reads only its Input and returns a Result. It
// does no I/O, reads no clock and draws no random numbers, so the same
// snapshot always yields the same plan. That is what lets the leader's loop
// around it stay thin, and what lets the tests compare a fast placer with an
// obvious one on random inputs.
package scheduler
