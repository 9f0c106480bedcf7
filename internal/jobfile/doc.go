// Package jobfile turns job files into *spec.Job values.
//
// Four formats are read, all into the same spec structs:
//
//   - HCL (.hcl, .nomad), shaped like a Nomad job file for the exec,
//     raw_exec and docker drivers: job "web" { group "api" { task "server"
//     { ... } } }. The body is walked by hand rather than with gohcl, so
//     that every problem has a file:line:col, a name the user typed, and,
//     for typos, a did-you-mean. Nomad features drover does not have yet
//     (template, volume, ...) are named as "not supported yet" rather than
//     "unknown", so a real Nomad file fails with a list of what to remove.
//     What a config block may hold depends on the task's driver
//     (spec.ConfigKeyRefusal says why a key is refused).
//     An HCL file may declare variable, variables and locals blocks, set
//     from outside by Options (-var, -var-file, NOMAD_VAR_x), call the
//     functions of Nomad's job language (hclfuncs.go) and use dynamic
//     blocks (hcl's dynblock, expanded as the walker reads each body);
//     runtime references such as ${NOMAD_ALLOC_ID} stay as written
//     (keepRuntimeRefs). Quoted numbers and bools convert as Nomad's do.
//   - JSON (.json): the spec structs' own JSON, strictly (unknown fields and
//     wrong types are errors), either a Job or the JobStatus wrapper that
//     `drover status JOB -o json` prints, of which only "job" is used; or
//     Nomad's API form {"Job": {"ID", "TaskGroups", ...}} (nomadapi.go),
//     rewritten into the same keys through the same schema.
//   - YAML (.yaml, .yml): converted to JSON and read like JSON. YAML syntax
//     errors keep their line; other YAML problems carry field paths only.
//   - fleet systemd units (.service) with an [X-Fleet] section, parsed with
//     go-systemd's unit parser and mapped as docs/fleet.md describes; a
//     template instance (web@1.service) is read from web@.service when the
//     instance file does not exist. A unit needs its file name, so it cannot
//     come from stdin.
//
// The job language is declared once, by the spec structs (schema.go): a
// field's json tag names it in every format, an hcl tag says only where HCL
// writes it otherwise (a block named in the singular, a block's label, a
// server-owned field not at all), and its Go type says the shape of its
// value. A reflection pass at init turns the structs into schemas, from
// which the JSON checker, the HCL walker's body schemas, one HCL decoder
// for every block (hclbody.go), the did-you-mean candidates and where a
// misplaced name belongs are all derived; TestNomadDocNamesTheSchema holds
// docs/nomad.md's compatibility table to it. What the structs cannot say
// (a weight's refused 0, a group's default count, Nomad's names drover
// does not take) is in small tables in schema.go. So a new attribute is one
// field in package spec, plus its row in docs/nomad.md.
//
// Nothing stops at the first problem. Decoding problems and the job's own
// validation problems (spec.Job.Validate) come back together as one
// spec.Problems, sorted by position, with validation problems mapped back to
// the place in the file that produced the field.
package jobfile
