package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// -o is taken or refused, by every command: each either declares the
// formats it prints or refuses json and yaml naming itself, and every
// command refuses an unknown format. The commands that print what they
// read declare json and yaml; logs and events, streams, json alone.
func TestEveryCommandTakesOrRefusesOutput(t *testing.T) {
	want := map[string]string{
		"drover status": "json,yaml", "drover ps": "json,yaml", "drover nodes": "json,yaml", "drover node status": "json,yaml",
		"drover job status": "json,yaml", "drover job inspect": "json,yaml", "drover alloc status": "json,yaml",
		"drover version": "json,yaml", "drover": "json,yaml", "drover plan": "json,yaml", "drover history": "json,yaml",
		"drover logs": "json", "drover alloc logs": "json", "drover events": "json",
		"drover run": "", "drover stop": "", "drover dev": "", "drover agent": "", "drover tls init": "", "drover validate": "",
	}
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.DisableFlagParsing {
			return // a group, or a Nomad verb drover answers with its nearest command
		}
		path := c.CommandPath()
		declared := c.Annotations[outputsKey]
		if w, ok := want[path]; ok {
			seen++
			if declared != w {
				t.Errorf("%s prints -o %q, want %q", path, declared, w)
			}
		}
		for _, f := range []string{"table", "json", "yaml", "xml"} {
			err := checkOutput(c, f)
			taken := f == "table" || strings.Contains(","+declared+",", ","+f+",")
			switch {
			case taken && err != nil:
				t.Errorf("%s -o %s: %v", path, f, err)
			case !taken && err == nil:
				t.Errorf("%s -o %s is taken but not declared", path, f)
			case !taken && f != "xml" && !strings.HasPrefix(err.Error(), path+" has no -o "+f+": "):
				t.Errorf("%s -o %s: %v", path, f, err)
			}
		}
	}
	walk(newRoot())
	if seen != len(want) {
		t.Errorf("found %d of the %d commands named here", seen, len(want))
	}
	// Through the command line, before anything else happens.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-o", "json", "/nonexistent/job.hcl"}, "drover run has no -o json: -o json and -o yaml are for the commands that print what they read"},
		{[]string{"stop", "web", "-o", "yaml"}, "drover stop has no -o yaml"},
		{[]string{"logs", "web", "-o", "yaml"}, "drover logs has no -o yaml: it prints -o table or -o json"},
		{[]string{"events", "-o", "yaml"}, "drover events has no -o yaml: it prints -o table or -o json"},
		{[]string{"ps", "-o", "xml"}, `unknown output format "xml": use -o table, -o json or -o yaml`},
		{[]string{"node", "drain", "n1", "-o", "json", "-address=http://127.0.0.1:1"}, "-o json goes with --detach or --disable"},
	} {
		if out, code := runDrover(t, "", c.args...); code != exitFailure || !strings.Contains(out, c.want) {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant exit 1 and %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
}

func TestParseInstance(t *testing.T) {
	for _, c := range []struct {
		in, name string
		index    int
		ok       bool
		err      string
	}{
		{"web", "web", 0, false, ""},
		{"web[2]", "web", 2, true, ""},
		{"web.api[10]", "web.api", 10, true, ""},
		{"web[", "", 0, false, "want JOB, JOB[INDEX] or JOB.GROUP[INDEX]"},
		{"web[x]", "", 0, false, "want JOB"},
		{"web[-1]", "", 0, false, "want JOB"},
		{"[1]", "", 0, false, "want JOB"},
		{"web[1]x", "", 0, false, "want JOB"},
	} {
		name, index, ok, err := parseInstance(c.in)
		if name != c.name || index != c.index || ok != c.ok || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("parseInstance(%q) = %q, %d, %v, %v", c.in, name, index, ok, err)
		}
	}
}
