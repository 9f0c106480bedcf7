// Package archtest enforces drover's architecture rules in its tests: the
// pure cores stay pure, and each outside system is imported by one package.
// It has no non-test code.
package archtest
