// Package e2e holds end-to-end tests that build the drover binary and run
// it as a user would: `drover dev` with real processes, the CLI verbs, and
// SIGKILL/SIGTERM against real PIDs. It has no non-test code.
package e2e
