package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// runDrover runs the drover command line with args, stdin as its input,
// and returns what it printed (stdout and stderr) and the exit code main
// would give.
func runDrover(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.code
	}
	return out.String() + "Error: " + err.Error() + "\n", exitFailure
}
