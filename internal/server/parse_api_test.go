package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestParseJob: POST /v1/jobs/parse decodes HCL and JSON with the CLI's
// decoder; a bad file is a 422 whose problems carry their line; the HCL
// file functions refuse rather than read the server's disk.
func TestParseJob(t *testing.T) {
	hs, _ := testServer(t)
	body := func(src string) string {
		b, _ := json.Marshal(spec.ParseRequest{Source: src})
		return string(b)
	}
	hcl := "job \"web\" {\n  group \"g\" {\n    count = 2\n    task \"t\" {\n      driver = \"raw_exec\"\n      config { command = \"/bin/true\" }\n    }\n  }\n}\n"
	var r spec.ParseResponse
	if status, out := call(t, "POST", hs.URL+"/v1/jobs/parse", body(hcl), &r); status != 200 || r.Job == nil || r.Job.Name != "web" || r.Job.Groups[0].Count != 2 {
		t.Fatalf("HCL: %d %s", status, out)
	}
	asJSON, _ := json.Marshal(r.Job)
	var again spec.ParseResponse
	if status, out := call(t, "POST", hs.URL+"/v1/jobs/parse", body(string(asJSON)), &again); status != 200 || again.Job.Groups[0].Count != 2 {
		t.Fatalf("JSON: %d %s", status, out)
	}

	for _, c := range []struct{ name, src, want string }{
		{"a typo on line 3", strings.Replace(hcl, "count", "cuont", 1), `"pos":"job:3:`},
		{"a bad count on line 3", strings.Replace(hcl, "count = 2", "count = -1", 1), `"pos":"job:3:`},
		{"file()", strings.Replace(hcl, `"/bin/true"`, `file("/etc/hostname")`, 1), "came without files"},
	} {
		var e spec.APIError
		status, out := call(t, "POST", hs.URL+"/v1/jobs/parse", body(c.src), nil)
		if status != 422 || json.Unmarshal([]byte(out), &e) != nil || len(e.Problems) == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%s: %d %s; want a 422 with %s", c.name, status, out, c.want)
		}
	}
	if status, out := call(t, "POST", hs.URL+"/v1/jobs/parse", `{"src": "x"}`, nil); status != 400 || !strings.Contains(out, "source") {
		t.Errorf("a body without source: %d %s", status, out)
	}
}
