package jobfile

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
)

// yamlLine finds the line in a YAML parser message: "yaml: line 4: ...".
var yamlLine = regexp.MustCompile(`^(?:error converting YAML to JSON: )?yaml: line (\d+): (.*)$`)

// yamlProblems adds the problems in a YAML parser error, keeping their
// lines. The parser reports either one syntax error ("yaml: line 4: ...")
// or a list ("yaml: unmarshal errors:\n  line 2: key \"name\" already set
// in map").
func yamlProblems(c *collector, msg string) {
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	if rest, ok := strings.CutPrefix(msg, "yaml: unmarshal errors:\n"); ok {
		for _, l := range strings.Split(rest, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				yamlProblems(c, "yaml: "+l)
			}
		}
		return
	}
	at := pos{}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		at, msg = pos{line: line}, m[2]
	}
	c.add(at, "", "YAML error: %s", strings.TrimPrefix(msg, "yaml: "))
}

// decodeYAML converts src to JSON and decodes that strictly, as JSON. The
// conversion loses positions, so problems other than YAML syntax errors
// carry field paths only. The warnings are returned valid file or not.
func decodeYAML(name string, src []byte, nodeHas func(string) bool) (*spec.Job, spec.Problems, error) {
	c := newCollector(name, nodeHas)
	job, err := decodeYAMLInto(c, src)
	return job, c.warningsResult(), err
}

func decodeYAMLInto(c *collector, src []byte) (*spec.Job, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		c.add(pos{line: 1, col: 1}, "", "the job file is empty")
		return nil, failed(c)
	}
	if err := inputlimit.Size(len(src)); err != nil {
		addLimit(c, err, false)
		return nil, failed(c)
	}
	// The YAML parser bounds its own nesting (at 10,000 levels); the
	// JSON it makes is checked against drover's limit before the tree
	// is built, without positions, which the conversion lost.
	js, err := yaml.YAMLToJSONStrict(src)
	if err != nil {
		yamlProblems(c, err.Error())
		return nil, failed(c)
	}
	if err := inputlimit.JSON(js); err != nil {
		addLimit(c, err, false)
		return nil, failed(c)
	}
	root, err := parseJSON(js)
	if err != nil {
		c.add(pos{}, "", "%v", err)
		return nil, failed(c)
	}
	if root.kind == 'z' {
		c.add(pos{line: 1, col: 1}, "", "the job file is empty")
		return nil, failed(c)
	}
	return decodeTree(root, &jchecker{c: c, at: positions{}})
}
