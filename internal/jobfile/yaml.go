package jobfile

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

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
// conversion loses positions; they are found again in the YAML's own
// tree (yamlPositions), so that problems and warnings name their
// line:col as in the other formats. The warnings are returned valid file
// or not.
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
	js, err := sigsyaml.YAMLToJSONStrict(src)
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
	return decodeTree(root, &jchecker{c: c, at: positions{}, ypos: yamlPositions(src, root)})
}

// yamlPositions gives root, the JSON that src converted to, the positions
// of the YAML its nodes came from: each node's off, and each key's, becomes
// an index in the table returned, where 0 stands for "not known". The YAML
// is read again as a tree of nodes (go.yaml.in/yaml/v3), whose values are
// not used: they stay the conversion's. A node is found by key, index,
// alias and merge key ("<<"); one that is not found has none.
func yamlPositions(src []byte, root *jnode) []pos {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		unknownPositions(root)
		return nil
	}
	table := []pos{{}}
	at := func(y *yaml.Node) int {
		table = append(table, pos{line: y.Line, col: y.Column})
		return len(table) - 1
	}
	var walk func(j *jnode, y *yaml.Node)
	walk = func(j *jnode, y *yaml.Node) {
		y = resolveAlias(y)
		if y == nil {
			unknownPositions(j)
			return
		}
		j.off = at(y)
		switch j.kind {
		case 'o':
			pairs := map[string][2]*yaml.Node{}
			mappingPairs(y, pairs, 0)
			for i, key := range j.keys {
				p, ok := pairs[key]
				if !ok {
					j.koffs[i] = 0
					unknownPositions(j.vals[i])
					continue
				}
				j.koffs[i] = at(p[0])
				walk(j.vals[i], p[1])
			}
		case 'a':
			for i, v := range j.vals {
				if y.Kind == yaml.SequenceNode && i < len(y.Content) {
					walk(v, y.Content[i])
				} else {
					unknownPositions(v)
				}
			}
		}
	}
	walk(root, doc.Content[0])
	return table
}

// resolveAlias follows y's aliases to the node they name.
func resolveAlias(y *yaml.Node) *yaml.Node {
	for n := 0; y != nil && y.Kind == yaml.AliasNode && n < 64; n++ {
		y = y.Alias
	}
	return y
}

// mappingPairs adds the keys of mapping y to pairs, key and value nodes by
// the key's text, those written in y first, then those of its merge keys
// ("<<": a mapping, or a list of them) that y does not write.
func mappingPairs(y *yaml.Node, pairs map[string][2]*yaml.Node, depth int) {
	y = resolveAlias(y)
	if y == nil || y.Kind != yaml.MappingNode || depth > 64 {
		return
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(y.Content); i += 2 {
		k, v := y.Content[i], y.Content[i+1]
		if k.Tag == "!!merge" || (k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0) {
			merges = append(merges, v)
			continue
		}
		if _, ok := pairs[k.Value]; !ok {
			pairs[k.Value] = [2]*yaml.Node{k, v}
		}
	}
	for _, m := range merges {
		m = resolveAlias(m)
		if m != nil && m.Kind == yaml.SequenceNode {
			for _, e := range m.Content {
				mappingPairs(e, pairs, depth+1)
			}
			continue
		}
		mappingPairs(m, pairs, depth+1)
	}
}

// unknownPositions marks j and what it holds as of no known position.
func unknownPositions(j *jnode) {
	j.off = 0
	for i := range j.koffs {
		j.koffs[i] = 0
	}
	for _, v := range j.vals {
		unknownPositions(v)
	}
}
