package main

import (
	"strings"
	"testing"
)

// A bad heartbeat bound is refused before the server starts, saying which
// flag and what it takes.
func TestServerRefusesABadHeartbeatBound(t *testing.T) {
	for _, v := range []string{"0", "-5"} {
		cmd := newServerCmd()
		cmd.SetArgs([]string{"--max-heartbeats-per-second", v, "--data-dir", t.TempDir()})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--max-heartbeats-per-second must be at least 1, got "+v) {
			t.Errorf("--max-heartbeats-per-second %s: %v", v, err)
		}
	}
}
