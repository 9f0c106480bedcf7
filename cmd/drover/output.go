package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"sigs.k8s.io/yaml"
)

// printJSON writes v as the API's JSON: -o json is the scripting contract.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// print writes v as -o asks: YAML for -o yaml (the API's JSON, with its
// field names, as YAML), else JSON.
func (g *globals) print(w io.Writer, v any) error {
	if g.output != "yaml" {
		return printJSON(w, v)
	}
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

// Every command prints its own text: -o table, the default. A command
// that prints what the API returns declares the formats it prints besides
// (outputs), and root refuses any other -o before a command runs
// (checkOutput): -o is taken or refused, never ignored.
const outputsKey = "drover.outputs"

// documents are the formats of a command that prints API objects.
var documents = []string{"json", "yaml"}

// outputs declares the -o formats cmd prints besides its table.
func outputs(cmd *cobra.Command, formats ...string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[outputsKey] = strings.Join(formats, ",")
	return cmd
}

// checkOutput refuses a -o format cmd does not print, saying what it does.
func checkOutput(cmd *cobra.Command, format string) error {
	if format == "table" {
		return nil
	}
	if !slices.Contains(documents, format) {
		return fmt.Errorf("unknown output format %q: use -o table, -o json or -o yaml", format)
	}
	have := strings.Split(cmd.Annotations[outputsKey], ",")
	switch {
	case slices.Contains(have, format):
		return nil
	case have[0] != "":
		return fmt.Errorf("%s has no -o %s: it prints -o table or -o %s", cmd.CommandPath(), format, strings.Join(have, " or -o "))
	}
	return fmt.Errorf("%s has no -o %s: -o json and -o yaml are for the commands that print what they read (drover status JOB -o json, drover ps -o yaml, ...)", cmd.CommandPath(), format)
}

// table writes aligned columns. The layout is for people; scripts use -o json.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) { fmt.Fprintln(t.tw, strings.Join(cols, "\t")) }
func (t *table) flush()             { t.tw.Flush() }

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// age renders how long ago t was, briefly: "3s", "5m", "2h", "4d".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
