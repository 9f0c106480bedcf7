package jobfile

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testkit"
)

// TestLargeFilesDecodeInLinearTime: files shaped to hit the decoders'
// quadratic paths, each found while seeding the fuzz targets, decode
// (into problems, mostly) in well under the bound. Before the fixes the
// first took 12 s, the second and third seconds to minutes, the last 30 s.
func TestLargeFilesDecodeInLinearTime(t *testing.T) {
	const n = 20000
	cases := []struct{ what, name, src string }{
		// Each position counted from the start of the file (jchecker.pos).
		{"a one-line JSON job of 100k groups", "f.json", `{"name":"web","groups":[` + strings.Repeat("{},", 100000-1) + "{}]}"},
		// The job's update block copied to each group (inheritUpdatePositions).
		{"20k groups under a job's update block", "f.json", `{"name":"web","update":{"max_parallel":1},"groups":[` + strings.Repeat("{},", n-1) + "{}]}"},
		// Each group's restart block copied to each task (inheritRestartPositions).
		{"20k groups with restart blocks", "f.json", `{"name":"web","groups":[` + strings.Repeat(`{"restart":{"attempts":1},"tasks":[{}]},`, n-1) + "{}]}"},
		{"100k duplicate keys", "f.json", `{"name":"web",` + strings.Repeat(`"name":"x",`, 100000) + `"groups":[]}`},
		// Each option's line found by scanning every line (readUnitOptions).
		{"a unit of 100k lines", "web.service", "[Service]\nExecStart=/bin/true\n" + strings.Repeat("Environment=A=1\n", 100000)},
	}
	// The CPU time of this process, which other tests loading the machine
	// do not inflate as they do the wall clock (no test of this package
	// runs beside this one: it is not parallel).
	for _, c := range cases {
		start := testkit.ProcessCPU(t)
		Decode(c.name, []byte(c.src))
		if took := testkit.ProcessCPU(t) - start; took > 5*time.Second {
			t.Errorf("%s (%d bytes): decoding took %v of CPU", c.what, len(c.src), took)
		}
	}
}
