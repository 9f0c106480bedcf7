// Package spec is drover's vocabulary: jobs, groups, tasks, nodes and
// allocations, their states, and the rules that say whether a job is valid.
//
// The structs here are the one schema: they are the
// HTTP API's request and response bodies, the `-o json` output of the CLI,
// and the target that every job-file decoder (HCL, JSON, YAML) fills in.
// A field's json tag is its name in every job file; an hcl tag says only
// where HCL writes it otherwise: a block named in the singular
// (`hcl:"group"` for Groups, one group block per group), the block's label
// (`hcl:",label"`), or not at all (`hcl:"-"`, the server-owned fields).
// internal/jobfile derives its decoders from these tags and the fields'
// Go types.
//
// Fields are split by writer. A Job's spec fields belong to the
// operator; the fields marked "server-owned" are set by the server and
// ignored on submit. An Alloc's desired fields are written only by the leader;
// its observed fields (AllocStatus) only by the agent that runs it.
//
// This package holds data and pure functions only: no I/O, no clocks.
package spec
