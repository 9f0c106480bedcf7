// Package acl is drover's authorization rules, pure: policies parsed from
// HCL, and the question "may this token do that in this namespace?".
// Storage of tokens and policies is the registry's; checking requests is
// the server's.
//
// A policy grants capabilities per namespace (a name, or a glob with '*')
// and on nodes:
//
//	namespace "default" { capabilities = ["read", "submit", "logs"] }
//	namespace "team-*"  { capabilities = ["read"] }
//	node { capabilities = ["read"] }
//
// A token carries policies; it may do what any rule of any of its policies
// grants (the union). A management token may do everything, including
// managing tokens and policies.
package acl

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
)

// Namespace capabilities.
const (
	// Read: see jobs, their versions, instances, deployments and services.
	Read = "read"
	// Submit: run, plan, stop, revert and restart jobs; promote and fail
	// their deployments; stop, restart and signal their instances.
	Submit = "submit"
	// Logs: read the logs of the namespace's instances.
	Logs = "logs"
	// Exec: run commands inside the namespace's running tasks (drover
	// exec): as much as the tasks themselves can do.
	Exec = "exec"
)

// Node capabilities.
const (
	NodeRead  = "read"  // list nodes, their usage, what losing them would do
	NodeWrite = "write" // drain, eligibility
)

// NamespaceCapabilities and NodeCapabilities are every capability a rule
// may name.
var (
	NamespaceCapabilities = []string{Read, Submit, Logs, Exec}
	NodeCapabilities      = []string{NodeRead, NodeWrite}
)

// Rules are a parsed policy.
type Rules struct {
	Namespaces []NamespaceRule `hcl:"namespace,block" json:"namespaces,omitempty"`
	Node       *NodeRule       `hcl:"node,block" json:"node,omitempty"`
}

// NamespaceRule grants capabilities in the namespaces its name matches.
type NamespaceRule struct {
	Name         string   `hcl:"name,label" json:"name"`
	Capabilities []string `hcl:"capabilities" json:"capabilities"`
}

// NodeRule grants capabilities on nodes.
type NodeRule struct {
	Capabilities []string `hcl:"capabilities" json:"capabilities"`
}

// Parse reads a policy's rules from HCL. Unknown blocks, attributes and
// capabilities are errors that name the line and the allowed values. A
// policy over inputlimit's size or depth is refused before it is parsed,
// with an error that wraps inputlimit's.
func Parse(filename string, src []byte) (*Rules, error) {
	if err := inputlimit.HCL(src); err != nil {
		return nil, fmt.Errorf("%s: the policy %w", filename, err)
	}
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	var r Rules
	if diags := gohcl.DecodeBody(f.Body, nil, &r); diags.HasErrors() {
		return nil, diagError(diags)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	return &r, nil
}

// diagError lists every error diagnostic, each with its place.
func diagError(diags hcl.Diagnostics) error {
	var msgs []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		m := d.Summary
		if d.Detail != "" {
			m += ": " + d.Detail
		}
		if d.Subject != nil {
			m = fmt.Sprintf("%s:%d: %s", d.Subject.Filename, d.Subject.Start.Line, m)
		}
		msgs = append(msgs, m)
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// Validate checks names and capabilities.
func (r *Rules) Validate() error {
	var problems []string
	if len(r.Namespaces) == 0 && r.Node == nil {
		problems = append(problems, `the policy grants nothing: add a namespace "NAME" { capabilities = [...] } or a node { capabilities = [...] } block`)
	}
	for _, n := range r.Namespaces {
		if msg := checkPattern(n.Name); msg != "" {
			problems = append(problems, fmt.Sprintf("namespace %q: %s", n.Name, msg))
		}
		for _, c := range n.Capabilities {
			if !slices.Contains(NamespaceCapabilities, c) {
				problems = append(problems, fmt.Sprintf("namespace %q: unknown capability %q; use %s", n.Name, c, strings.Join(NamespaceCapabilities, ", ")))
			}
		}
	}
	if r.Node != nil {
		for _, c := range r.Node.Capabilities {
			if !slices.Contains(NodeCapabilities, c) {
				problems = append(problems, fmt.Sprintf("node: unknown capability %q; use %s", c, strings.Join(NodeCapabilities, ", ")))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// checkPattern allows a namespace name or a glob of one ('*' for any run
// of characters).
func checkPattern(p string) string {
	if p == "" {
		return "must not be empty"
	}
	for _, r := range p {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '*'
		if !ok {
			return fmt.Sprintf("contains %q; use letters, digits, '-', '_', '.', and '*' as a wildcard", r)
		}
	}
	return ""
}

// ACL is what one token may do: its policies' rules, merged.
type ACL struct {
	management bool
	// exact and globs map a namespace (pattern) to its capabilities.
	exact map[string][]string
	globs map[string][]string
	node  []string
}

// Management may do everything.
func Management() *ACL { return &ACL{management: true} }

// New merges rules into one ACL.
func New(rules ...*Rules) *ACL {
	a := &ACL{exact: map[string][]string{}, globs: map[string][]string{}}
	for _, r := range rules {
		if r == nil {
			continue
		}
		for _, n := range r.Namespaces {
			m := a.exact
			if strings.Contains(n.Name, "*") {
				m = a.globs
			}
			m[n.Name] = append(m[n.Name], n.Capabilities...)
		}
		if r.Node != nil {
			a.node = append(a.node, r.Node.Capabilities...)
		}
	}
	return a
}

// IsManagement reports whether a may do everything.
func (a *ACL) IsManagement() bool { return a.management }

// Allow reports whether a grants capability in namespace ns.
func (a *ACL) Allow(ns, capability string) bool {
	if a.management {
		return true
	}
	ns = spec.NamespaceOf(ns)
	if slices.Contains(a.exact[ns], capability) {
		return true
	}
	for pat, caps := range a.globs {
		if ok, _ := path.Match(pat, ns); ok && slices.Contains(caps, capability) {
			return true
		}
	}
	return false
}

// AllowNode reports whether a grants capability on nodes.
func (a *ACL) AllowNode(capability string) bool {
	return a.management || slices.Contains(a.node, capability)
}

// Namespaces lists the namespace names and patterns a grants anything
// in, sorted: for error messages that say what a token can see.
func (a *ACL) Namespaces() []string {
	var out []string
	for n := range a.exact {
		out = append(out, n)
	}
	for n := range a.globs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
