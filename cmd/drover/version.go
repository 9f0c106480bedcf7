package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/module"
)

// version is the release's name, stamped by a release build:
//
//	go build -ldflags "-X main.version=v1.2.0" ./cmd/drover
//
// Without it drover says what the Go toolchain embedded, and "devel" for a
// build from a working tree. dist/release.sh stamps commit, commitDate
// and modified too (from git), which win over what the toolchain
// recorded: it records nothing in a git worktree or with -buildvcs=false.
var version, commit, commitDate, modified string

// stamp is what a build stamped with -ldflags -X.
type stamp struct{ version, commit, commitDate, modified string }

// etcdClientModule is the module whose version `drover version` reports:
// the client servers speak to etcd with.
const etcdClientModule = "go.etcd.io/etcd/client/v3"

// unknown is what drover says of a fact the binary does not carry (a build
// outside a git checkout has no commit), rather than invent one.
const unknown = "unknown"

// versionInfo is `drover version`; its JSON is what -o json prints.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Modified is true when the working tree had uncommitted changes, so
	// the commit alone does not reproduce the binary.
	Modified bool `json:"modified"`
	// CommitDate is the commit's time: the toolchain records no build
	// time, which keeps builds reproducible.
	CommitDate string `json:"commit_date"`
	GoVersion  string `json:"go_version"`
	EtcdClient string `json:"etcd_client_version"`
}

// buildVersion reads what the toolchain embedded in the binary (bi is nil
// when it embedded nothing) and what was stamped, which wins.
func buildVersion(bi *debug.BuildInfo, st stamp) versionInfo {
	v := buildInfoVersion(bi, st.version)
	if st.commit != "" {
		v.Commit, v.Modified = st.commit, st.modified == "true"
	}
	if st.commitDate != "" {
		v.CommitDate = st.commitDate
	}
	return v
}

// buildInfoVersion is what the toolchain embedded; stamped, when set, is
// main.version.
func buildInfoVersion(bi *debug.BuildInfo, stamped string) versionInfo {
	v := versionInfo{Version: stamped, Commit: unknown, CommitDate: unknown, GoVersion: unknown, EtcdClient: unknown}
	if bi == nil {
		if v.Version == "" {
			v.Version = "devel"
		}
		return v
	}
	v.GoVersion = bi.GoVersion
	if v.Version == "" {
		v.Version = moduleVersion(bi.Main.Version)
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitDate = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		if d.Path == etcdClientModule {
			v.EtcdClient = d.Version
			if d.Replace != nil {
				v.EtcdClient = d.Replace.Version
			}
		}
	}
	return v
}

// moduleVersion is the main module's version as the toolchain set it: a
// tag for `go install ...@v1.2.0`, "(devel)" or a pseudo-version
// (v0.0.0-20260102150405-abcdef123456, +dirty) for a build from a
// checkout, which is a development build: the commit says which.
func moduleVersion(v string) string {
	base, _, _ := strings.Cut(v, "+")
	if v == "" || v == "(devel)" || module.IsPseudoVersion(base) {
		return "devel"
	}
	return v
}

func (v versionInfo) print(w io.Writer) {
	commit := v.Commit
	if v.Modified {
		commit += " (with uncommitted changes)"
	}
	fmt.Fprintf(w, "drover %s\n", v.Version)
	fmt.Fprintf(w, "Commit       %s\n", commit)
	fmt.Fprintf(w, "Commit date  %s\n", v.CommitDate)
	fmt.Fprintf(w, "Go           %s\n", v.GoVersion)
	fmt.Fprintf(w, "etcd client  %s\n", v.EtcdClient)
}

// printVersion is `drover version`, `drover --version` and `drover -v`.
func (g *globals) printVersion(cmd *cobra.Command) error {
	bi, _ := debug.ReadBuildInfo()
	v := buildVersion(bi, stamp{version, commit, commitDate, modified})
	if g.output != "table" {
		return g.print(cmd.OutOrStdout(), v)
	}
	v.print(cmd.OutOrStdout())
	return nil
}

func newVersionCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "version",
		Short: "Print drover's version, git commit, build date, Go and etcd client versions",
		Long: `Version prints what the binary carries: the release it was stamped with
(-ldflags "-X main.version=..."), or "devel" for a build from a checkout;
the git commit and its date, and whether the tree had uncommitted changes,
as the Go toolchain recorded them ("unknown" when it did not, as for a
build outside a git checkout); and the Go and etcd client versions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return g.printVersion(cmd) },
	}, documents...)
}
