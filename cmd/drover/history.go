package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

func newHistoryCmd(g *globals) *cobra.Command {
	var noDiff bool
	cmd := &cobra.Command{
		Use:   "history JOB",
		Short: "List a job's versions, newest first, with their deployments and what each changed",
		Long: `History lists the stored versions of a job, newest first: when each was
submitted, how its deployment went (a version whose deployment succeeded is
stable: auto_revert and drover revert go back to such versions), and under
each version the fields it changed from the one before:

  + a field it added   - a field it removed   ~ a field it changed

Groups, tasks, services and checks are named by name: groups[api].count.`,
		Example: `  drover history web
  drover history web --no-diff
  drover history web -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			versions, err := c.JobVersions(ctx, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output != "table" {
				return g.print(out, versions)
			}
			deps, _, err := c.JobDeployments(ctx, args[0], nil)
			if err != nil {
				return err
			}
			printHistory(out, versions, deps, time.Now(), !noDiff)
			return nil
		},
	}
	cmd.Flags().BoolVar(&noDiff, "no-diff", false, "list the versions without what each changed")
	return outputs(cmd, documents...)
}

// printHistory renders versions (newest first) with their deployments'
// outcomes and, with diffs, each version's changes from the next older one
// listed. The oldest listed version has nothing to compare with.
func printHistory(w io.Writer, versions []*spec.Job, deps []*spec.Deployment, now time.Time, diffs bool) {
	if len(versions) == 0 {
		fmt.Fprintln(w, "No versions.")
		return
	}
	byVersion := map[uint64]*spec.Deployment{}
	for _, d := range deps { // newest first: keep the first per version
		if byVersion[d.JobVersion] == nil {
			byVersion[d.JobVersion] = d
		}
	}
	// Align the rows as one table, then put each version's changes under
	// its row: tabwriter would end its column block at every change line.
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSUBMITTED\tDEPLOYMENT")
	for _, v := range versions {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", v.Version, age(now, v.SubmitTime)+" ago", historyDeployment(byVersion[v.Version]))
	}
	tw.Flush()
	lines := strings.SplitAfter(b.String(), "\n")
	io.WriteString(w, lines[0])
	for i, v := range versions {
		io.WriteString(w, lines[i+1])
		if !diffs || i+1 == len(versions) {
			continue
		}
		changes := specChanges(versions[i+1], v)
		if len(changes) == 0 {
			fmt.Fprintln(w, "  (no change to the spec)")
		}
		for _, c := range changes {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
}

// historyDeployment is a version's deployment in a word or three.
func historyDeployment(d *spec.Deployment) string {
	switch {
	case d == nil:
		return "-"
	case d.Status == spec.DeploymentSuccessful:
		return "successful (stable)"
	case d.Status == spec.DeploymentFailed && d.RevertTo != 0:
		return fmt.Sprintf("failed (reverted to %d)", d.RevertTo)
	}
	return string(d.Status)
}

// change is one field that differs between two versions of a job.
type change struct {
	// Op is '+' (only the newer version has the field), '-' (only the
	// older one), or '~' (both, with different values).
	Op       byte
	Path     string
	From, To string // the values as JSON; "" where the field is absent
}

func (c change) String() string {
	switch c.Op {
	case '+':
		return fmt.Sprintf("+ %s: %s", c.Path, c.To)
	case '-':
		return fmt.Sprintf("- %s: %s", c.Path, c.From)
	}
	return fmt.Sprintf("~ %s: %s -> %s", c.Path, c.From, c.To)
}

// specChanges lists, sorted by path, the fields of the operator-written
// part of a job (SpecOnly) that differ from version from to version to.
// Both are flattened to path -> value (flattenJSON), so that a field is
// compared by its path, not by its position: a group inserted before
// another shows as that group's fields, not as every later group changed.
func specChanges(from, to *spec.Job) []change {
	a, b := flattenJob(from), flattenJob(to)
	var out []change
	for p, x := range a {
		y, ok := b[p]
		switch {
		case !ok:
			out = append(out, change{Op: '-', Path: p, From: x})
		case x != y:
			out = append(out, change{Op: '~', Path: p, From: x, To: y})
		}
	}
	for p, y := range b {
		if _, ok := a[p]; !ok {
			out = append(out, change{Op: '+', Path: p, To: y})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func flattenJob(j *spec.Job) map[string]string {
	out := map[string]string{}
	if j == nil {
		return out
	}
	raw, err := json.Marshal(j.SpecOnly())
	if err != nil {
		panic("drover: a job does not marshal: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // 10000000000 stays itself, not 1e+10
	var v any
	if err := dec.Decode(&v); err != nil {
		panic("drover: a job's JSON does not decode: " + err.Error())
	}
	flattenJSON("", v, out)
	return out
}

// flattenJSON records every leaf of v under its path: object keys joined
// by dots (env.VERSION; a key that is not a plain word is quoted:
// meta["a.b"]), lists of objects that all have distinct names by name
// (groups[api].tasks[server]), other lists of objects by index
// (constraints[0]), and lists of plain values, empty objects and empty
// lists whole, as JSON.
func flattenJSON(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			for k, e := range x {
				flattenJSON(joinKey(path, k), e, out)
			}
			return
		}
	case []any:
		if keys, ok := listKeys(x); ok && len(x) > 0 {
			for i, e := range x {
				flattenJSON(path+"["+keys[i]+"]", e, out)
			}
			return
		}
	}
	out[path] = showJSON(v)
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func joinKey(path, k string) string {
	if !plainKey.MatchString(k) {
		return path + "[" + strconv.Quote(k) + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// listKeys names the items of a list of objects: by their "name" when
// every item has a distinct one, else by index. ok is false when some
// item is not an object: such a list is one value.
func listKeys(l []any) (keys []string, ok bool) {
	byName := true
	seen := map[string]bool{}
	for _, e := range l {
		m, isObj := e.(map[string]any)
		if !isObj {
			return nil, false
		}
		name, _ := m["name"].(string)
		if name == "" || seen[name] {
			byName = false
		}
		seen[name] = true
	}
	for i, e := range l {
		k := strconv.Itoa(i)
		if byName {
			k = e.(map[string]any)["name"].(string)
			if !plainKey.MatchString(k) {
				k = strconv.Quote(k)
			}
		}
		keys = append(keys, k)
	}
	return keys, true
}

// maxValue bounds one side of a change line; the job file has the rest.
const maxValue = 120

func showJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // show "a<b" as written, not "a\u003cb"
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if r := []rune(s); len(r) > maxValue {
		return string(r[:maxValue]) + "..."
	}
	return s
}
