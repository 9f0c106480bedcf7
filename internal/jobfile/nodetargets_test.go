package jobfile

import (
	"reflect"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestNodeTargetWarnings: each node attribute or meta key that a
// constraint, affinity, spread or interpolation reads and no node has is
// a warning with its field and the position of the value that names it,
// in HCL and in JSON. Without the cluster's nodes (validate) the warnings
// are of attributes drover never publishes; with them (plan's NodeHas),
// also of published ones and meta keys that no current node has.
func TestNodeTargetWarnings(t *testing.T) {
	hclSrc := `job "w" {
  constraint {
    attribute = "${attr.platform.aws.ami-id}"
    operator  = "is_not_set"
  }
  group "g" {
    spread { attribute = "${meta.rack}" }
    task "t" {
      driver = "raw_exec"
      env {
        K = "${attr.kernel.name}"
        D = "${attr.driver.docker}"
      }
      config {
        command = "/bin/echo"
        args    = ["a", "${attr.vault.version}"]
      }
    }
  }
}
`
	jsonSrc := `{
  "name": "w",
  "constraints": [{"attribute": "${attr.platform.aws.ami-id}", "operator": "is_not_set"}],
  "groups": [{
    "name": "g",
    "spreads": [{"attribute": "${meta.rack}"}],
    "tasks": [{
      "name": "t",
      "driver": "raw_exec",
      "env": {"K": "${attr.kernel.name}", "D": "${attr.driver.docker}"},
      "config": {"command": "/bin/echo", "args": ["a", "${attr.vault.version}"]}
    }]
  }]
}
`
	yamlSrc := `name: w
constraints:
  - attribute: "${attr.platform.aws.ami-id}"
    operator: is_not_set
groups:
  - name: g
    spreads: [{attribute: "${meta.rack}"}]
    tasks:
      - name: t
        driver: raw_exec
        env: {K: "${attr.kernel.name}", D: "${attr.driver.docker}"}
        config:
          command: /bin/echo
          args: [a, "${attr.vault.version}"]
`
	const (
		ami    = "${attr.platform.aws.ami-id} is not an attribute drover nodes publish (docs/nomad.md lists those they do), so no node matches it but with != or is_not_set"
		vault  = "${attr.vault.version} is Vault's, and drover works without Vault (no secrets store): no node publishes it, so it is left as written: the task sees the text ${attr.vault.version}"
		rack   = "${meta.rack} is on no current node (drover nodes NODE shows a node's attributes and meta), so no node matches it but with != or is_not_set"
		docker = "${attr.driver.docker} is on no current node (drover nodes NODE shows a node's attributes and meta), so it is left as written: the task sees the text ${attr.driver.docker}"
	)
	// A cluster of one node with raw_exec only, no meta.
	node := &spec.Node{Drivers: []string{"raw_exec"}, Attributes: map[string]string{spec.AttrKernelName: "linux"}}
	nodeHas := func(name string) bool { _, ok := node.Value(name); return ok }
	for _, tc := range []struct {
		file, src string
		nodeHas   func(string) bool
		want      spec.Problems
	}{
		{"w.hcl", hclSrc, nil, spec.Problems{
			{Field: "constraints[0].attribute", Pos: "w.hcl:3:17", Message: ami},
			{Field: "groups[0].tasks[0].config.args[1]", Pos: "w.hcl:16:25", Message: vault},
		}},
		{"w.hcl", hclSrc, nodeHas, spec.Problems{
			{Field: "constraints[0].attribute", Pos: "w.hcl:3:17", Message: ami},
			{Field: "groups[0].spreads[0].attribute", Pos: "w.hcl:7:26", Message: rack},
			{Field: "groups[0].tasks[0].env.D", Pos: "w.hcl:12:13", Message: docker},
			{Field: "groups[0].tasks[0].config.args[1]", Pos: "w.hcl:16:25", Message: vault},
		}},
		{"w.json", jsonSrc, nil, spec.Problems{
			{Field: "constraints[0].attribute", Pos: "w.json:3:33", Message: ami},
			{Field: "groups[0].tasks[0].config.args[1]", Pos: "w.json:11:56", Message: vault},
		}},
		{"w.json", jsonSrc, nodeHas, spec.Problems{
			{Field: "constraints[0].attribute", Pos: "w.json:3:33", Message: ami},
			{Field: "groups[0].spreads[0].attribute", Pos: "w.json:6:31", Message: rack},
			{Field: "groups[0].tasks[0].env.D", Pos: "w.json:10:48", Message: docker},
			{Field: "groups[0].tasks[0].config.args[1]", Pos: "w.json:11:56", Message: vault},
		}},
		{"w.yaml", yamlSrc, nodeHas, spec.Problems{
			{Field: "constraints[0].attribute", Pos: "w.yaml:3:16", Message: ami},
			{Field: "groups[0].spreads[0].attribute", Pos: "w.yaml:7:27", Message: rack},
			{Field: "groups[0].tasks[0].env.D", Pos: "w.yaml:11:44", Message: docker},
			{Field: "groups[0].tasks[0].config.args[1]", Pos: "w.yaml:14:21", Message: vault},
		}},
	} {
		_, warns, err := DecodeWith(tc.file, []byte(tc.src), Options{NodeHas: tc.nodeHas})
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if !reflect.DeepEqual(warns, tc.want) {
			t.Errorf("%s (nodes known: %v): warnings\n%v\nwant\n%v", tc.file, tc.nodeHas != nil, warns, tc.want)
		}
	}
}
