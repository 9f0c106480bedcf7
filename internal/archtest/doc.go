// Package archtest enforces drover's architecture rules in its tests: the
// pure cores stay pure, each outside system is imported by one package,
// the leader's loop stays apart from HTTP and the server, and the key
// table of docs/architecture.md names every key the registry declares. It
// has no non-test code.
package archtest
