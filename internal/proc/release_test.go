package proc

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKB is this process's resident file pages (RssFile).
func rssFileKB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseExecutable: the process keeps running (its code is faulted
// back in as needed: this test goes on after it) and its resident file
// pages go down.
func TestReleaseExecutable(t *testing.T) {
	before := rssFileKB(t)
	n, err := ReleaseExecutable()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKB(t)
	if n == 0 || after >= before {
		t.Fatalf("released %d bytes of mappings; RssFile %d kB -> %d kB", n, before, after)
	}
	t.Logf("RssFile %d kB -> %d kB", before, after)
}
