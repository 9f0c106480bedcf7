package e2e

import (
	"bufio"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// drover logs picks one instance by index (web[1], web.api[1]) or by ID
// (--alloc), and -o json prints one JSON object per line; the commands
// that print what they read print -o yaml as the API's fields, and the
// rest refuse -o json with a message.
func TestLogsOneInstanceAndOutputFormats(t *testing.T) {
	d := startDev(t, t.TempDir())
	file := writeTemp(t, "idx.hcl", `job "idx" {
  group "g" {
    count = 3
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo line-from-$DROVER_ALLOC_INDEX; echo err-from-$DROVER_ALLOC_INDEX >&2; sleep 300"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`)
	if _, stderr, code := d.cli("", "run", file); code != 0 {
		t.Fatalf("drover run: %s", stderr)
	}
	st := d.jobStatus("idx")
	var id1 string
	for _, a := range st.Allocations {
		if a.Index == 1 {
			id1 = a.ID
		}
	}
	waitFor(t, 20*time.Second, "every instance wrote its line", func() bool {
		out, _, _ := d.cli("", "logs", "idx")
		return strings.Count(out, "line-from-") == 3
	})
	for _, args := range [][]string{{"logs", "idx[1]"}, {"logs", "idx.g[1]"}, {"logs", "--alloc", id1[:8]}, {"logs", "-alloc", id1, "idx/t"}, {"alloc", "logs", id1[:6]}} {
		out, stderr, code := d.cli("", args...)
		if code != 0 || out != "line-from-1\n" {
			t.Errorf("drover %s: exit %d, printed %q %s; want instance 1's line alone", strings.Join(args, " "), code, out, stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "idx[7]"}, `job "idx" has no instance idx[7]; drover status idx lists them`},
		{[]string{"logs", "idx.h[1]"}, `job "idx" has no instance idx.h[1]`},
		{[]string{"logs", "nosuch[1]"}, `nosuch`},
		{[]string{"logs", "idx[x]"}, "want JOB, JOB[INDEX] or JOB.GROUP[INDEX]"},
		{[]string{"logs", "--alloc", id1, "other"}, `of job "idx", not of "other"`},
		{[]string{"logs"}, "name a job"},
	} {
		if _, stderr, code := d.cli("", c.args...); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("drover %s: exit %d, %s; want exit 1 and %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}

	// -o json: a line of JSON per log line, saying whose it is.
	out, stderr, code := d.cli("", "logs", "idx", "--stderr", "-o", "json")
	if code != 0 {
		t.Fatalf("logs -o json: %s", stderr)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l struct {
			AllocID  string `json:"alloc_id"`
			Instance string `json:"instance"`
			Task     string `json:"task"`
			Stream   string `json:"stream"`
			Line     string `json:"line"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("logs -o json: %q is not JSON: %v", sc.Text(), err)
		}
		if l.Task != "t" || l.Stream != "stderr" || !strings.HasPrefix(l.Instance, "idx.g[") || l.AllocID == "" || "err-from-"+l.Instance[6:7] != l.Line {
			t.Errorf("logs -o json line %+v", l)
		}
		seen[l.Line] = true
	}
	if len(seen) != 3 {
		t.Errorf("logs -o json: lines %v, want one from each of 3 instances\n%s", seen, out)
	}

	// -o yaml: the API's field names, as -o json has them.
	for _, args := range [][]string{{"status", "idx"}, {"status"}, {"ps"}, {"nodes"}, {"alloc", "status", id1}, {"job", "inspect", "idx"}, {"history", "idx"}, {"deployment", "list"}, {"acl", "token", "self"}, {"servers"}} {
		jsonOut, stderr, code := d.cli("", append(args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("drover %s -o json: %s", strings.Join(args, " "), stderr)
		}
		yamlOut, stderr, code := d.cli("", append(args, "-o", "yaml")...)
		if code != 0 {
			t.Fatalf("drover %s -o yaml: %s", strings.Join(args, " "), stderr)
		}
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(jsonOut), &fromJSON); err != nil {
			t.Fatalf("drover %s -o json: %v", strings.Join(args, " "), err)
		}
		if err := yaml.Unmarshal([]byte(yamlOut), &fromYAML); err != nil || fromYAML == nil || strings.HasPrefix(strings.TrimSpace(yamlOut), "{") {
			t.Fatalf("drover %s -o yaml is not YAML: %v\n%s", strings.Join(args, " "), err, yamlOut)
		}
		// The same document, but for what changed between the two reads.
		if keys(fromJSON) != keys(fromYAML) {
			t.Errorf("drover %s: -o json has %s, -o yaml %s", strings.Join(args, " "), keys(fromJSON), keys(fromYAML))
		}
	}
	if _, stderr, code := d.cli("", "stop", "idx", "-o", "json"); code != 1 || !strings.Contains(stderr, "drover stop has no -o json") {
		t.Errorf("drover stop -o json: exit %d, %s", code, stderr)
	}
}

// keys names a document's top-level fields (or, for a list, its length
// and its first element's fields).
func keys(v any) string {
	switch v := v.(type) {
	case map[string]any:
		var ks []string
		for k := range v {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, ",")
	case []any:
		if len(v) == 0 {
			return "[]"
		}
		return "[" + keys(v[0]) + "]"
	}
	return "scalar"
}
