package ui

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/drover-org/drover/internal/execstream"
)

// TestExecFrameTypesMatch: the terminal's script (static/exec.js) numbers
// drover exec's frame types as internal/execstream does, since the server
// relays its WebSocket messages to the agent by those numbers.
func TestExecFrameTypesMatch(t *testing.T) {
	src, err := os.ReadFile("static/exec.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`export const frame = \{([^}]*)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("static/exec.js has no `export const frame = { ... }`")
	}
	got := map[string]byte{}
	for _, kv := range regexp.MustCompile(`(\w+): (\d+)`).FindAllSubmatch(m[1], -1) {
		n, _ := strconv.Atoi(string(kv[2]))
		got[string(kv[1])] = byte(n)
	}
	want := map[string]byte{"stdin": execstream.Stdin, "stdout": execstream.Stdout, "stderr": execstream.Stderr,
		"resize": execstream.Resize, "closeStdin": execstream.CloseStdin, "exit": execstream.Exit, "error": execstream.Error}
	if len(got) != len(want) {
		t.Errorf("exec.js names %d frame types %v; execstream has %d", len(got), got, len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("exec.js's frame.%s is %d (named: %v); execstream's is %d", k, g, ok, v)
		}
	}
}
