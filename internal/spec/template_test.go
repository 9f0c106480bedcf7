package spec

import (
	"strings"
	"testing"
)

// TestTemplateValidation: each mistake in a template block is refused at
// its field with what to write.
func TestTemplateValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		tp   Template
		want string // "" for valid
	}{
		{"inline", Template{Data: `x={{ env "NOMAD_ALLOC_ID" }}`, Destination: "local/x"}, ""},
		{"source under a dir variable", Template{Source: "local/x.tpl", Destination: "${NOMAD_SECRETS_DIR}/x", ChangeMode: ChangeSignal, ChangeSignal: "SIGHUP"}, ""},
		{"neither", Template{Destination: "local/x"}, "templates[0]: task \"t\": template 1 needs data"},
		{"both", Template{Data: "a", Source: "b", Destination: "local/x"}, "templates[0].source: task \"t\": template 1 has both data and source"},
		{"syntax", Template{Data: "{{ if }}", Destination: "local/x"}, "templates[0].data: task \"t\": template 1: template: x:1: missing value for if"},
		{"consul KV", Template{Data: `{{ key "a" }}`, Destination: "local/x"},
			`template function "key" is not available: it reads Consul's KV store, which drover does not have; the functions are base64Decode,`},
		{"unknown function", Template{Data: `{{ frob }}`, Destination: "local/x"}, `template function "frob" is not available: drover does not have it`},
		{"no destination", Template{Data: "a"}, "templates[0].destination: task \"t\": template 1: needs a destination"},
		{"absolute", Template{Data: "a", Destination: "/etc/x"}, `destination "/etc/x" is absolute`},
		{"escapes", Template{Data: "a", Destination: "${NOMAD_TASK_DIR}/../../x"}, `leaves the task's directory`},
		{"Nomad's ../alloc/: the alloc's shared directory", Template{Data: "a", Destination: "../alloc/app.conf"}, ""},
		{"../alloc itself is a directory", Template{Data: "a", Destination: "../alloc"}, `destination "../alloc" names a directory, not a file`},
		{"beside the alloc dir", Template{Data: "a", Destination: "../allocx/app.conf"}, `leaves the task's directory; write it inside ("local/app.conf"), or in the alloc's shared directory ("../alloc/app.conf")`},
		{"out of the alloc dir through ../alloc", Template{Data: "a", Destination: "../alloc/../../x"}, `leaves the task's directory`},
		{"other variable", Template{Data: "a", Destination: "${NOMAD_META_dir}/${NOMAD_TASK_NAME}.env"}, ""},
		{"signal without one", Template{Data: "a", Destination: "x", ChangeMode: ChangeSignal}, `change_mode "signal" needs a change_signal`},
		{"bad signal", Template{Data: "a", Destination: "x", ChangeMode: ChangeSignal, ChangeSignal: "hup"}, `unknown signal "hup"; write it "SIGHUP"`},
		{"signal without mode", Template{Data: "a", Destination: "x", ChangeSignal: "SIGHUP"}, `change_signal is for change_mode = "signal"`},
		{"bad mode", Template{Data: "a", Destination: "x", ChangeMode: "bounce"}, `unknown change_mode "bounce"`},
		{"perms", Template{Data: "a", Destination: "x", Perms: "rw"}, `perms "rw" is not an octal file mode`},
		{"one delimiter", Template{Data: "a", Destination: "x", LeftDelimiter: "[["}, `set both left_delimiter and right_delimiter`},
	} {
		tp := c.tp
		err := optionsJob(func(_ *Group, t *Task) { t.Templates = []*Template{&tp} }).Validate().Err()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestTemplateRender: the functions read what TemplateData gives them.
func TestTemplateRender(t *testing.T) {
	vars := map[string]string{"NOMAD_ALLOC_ID": "a1", "attr.cpu.arch": "amd64", "CSV": "x,y"}
	d := TemplateData{
		Lookup: func(n string) (string, bool) { v, ok := vars[n]; return v, ok },
		Service: func(n string) ([]TemplateService, error) {
			if n != "db" {
				return nil, nil
			}
			return []TemplateService{{Name: "db", Address: "10.0.0.1", Port: 5432, Tags: []string{"primary"}}, {Name: "db", Address: "10.0.0.2", Port: 5433}}, nil
		},
	}
	tp := &Template{Destination: "local/x", LeftDelimiter: "[[", RightDelimiter: "]]"}
	text := `[[ env "NOMAD_ALLOC_ID" ]] [[ env "attr.cpu.arch" ]] [[ envOrDefault "NOPE" "d" ]] [[ join ";" (split "," (env "CSV")) ]]
[[ range service "db" ]][[ .Address ]]:[[ .Port ]][[ if .Tags | contains "primary" ]] (primary)[[ end ]]
[[ end ]][[ range service "none" ]]never[[ end ]]{{ not a template }}`
	got, err := tp.Render(text, d)
	want := "a1 amd64 d x;y\n10.0.0.1:5432 (primary)\n10.0.0.2:5433\n{{ not a template }}"
	if err != nil || got != want {
		t.Errorf("Render = %q, %v; want %q", got, err, want)
	}
}

func TestParseEnvFile(t *testing.T) {
	got, err := ParseEnvFile("# c\n\nA=1\nexport B = two words \nC=\"q\\tx\"\nD='s'\n")
	if err != nil || len(got) != 4 || got["A"] != "1" || got["B"] != "two words" || got["C"] != "q\tx" || got["D"] != "s" {
		t.Errorf("ParseEnvFile = %q, %v", got, err)
	}
	if _, err := ParseEnvFile("A=1\nnot a pair\n"); err == nil || !strings.Contains(err.Error(), `line 2: "not a pair" is not KEY=value`) {
		t.Errorf("bad line: %v", err)
	}
}
