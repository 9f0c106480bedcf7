// Package planner is one scheduling pass: from what the pass sees (Input:
// jobs, their allocs, deployments and schedule records, the nodes, the
// other allocs) and a time, Decide runs the reconciler (what to place,
// stop and forget), then the scheduler (where), and builds the plan that
// carries both out (a spec.Plan: allocs placed and stopped, schedule
// records, deployments, and the events that describe them).
//
// It is pure, like the cores it joins: no I/O, no clock (now is an
// argument), no randomness (new IDs come from the caller's newID), so the
// same input gives the same plan. The leader commits the plan; `drover
// plan` runs the same pass on any server and writes nothing; the tests
// run it as transcripts (testdata/golden). What it reads comes from the
// server's store; the leader's loop fills Input (internal/leader/pass.go).
package planner
