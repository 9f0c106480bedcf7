package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/jobfile"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

func newValidateCmd(g *globals) *cobra.Command {
	var vars jobVars
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check job files without a server",
		Long: fmt.Sprintf(`Validate decodes each job file (HCL, JSON, YAML, or a fleet .service unit: see docs/fleet.md) and checks it, printing
every problem with its file:line:col, and warns, at theirs, of constraints, affinities, spreads and interpolations
(${attr.x} in env, config, service names and tags) on node attributes drover's agents do not publish (docs/nomad.md lists those they do). It needs no server, and applies the server's limits: a file over %d KiB, nested
deeper than %d levels, or whose job would be a record over %d KiB is not valid.`, inputlimit.MaxBytes>>10, inputlimit.MaxDepth, registry.MaxRecordBytes>>10),
		Example: "  drover validate examples/hello.hcl\n  drover validate -var image=redis:7 -var-file prod.hcl job.nomad\n  cat job.json | drover validate -",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, path := range args {
				job, err := readJob(path, cmd.InOrStdin(), cmd.ErrOrStderr(), vars.options())
				if err != nil {
					bad++
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					continue
				}
				instances := 0
				for _, grp := range job.Groups {
					instances += grp.Count
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: valid %s job %q: %d group(s), %d instance(s)\n",
					displayName(path), job.Type, job.Name, len(job.Groups), instances)
			}
			if bad > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("%d of %d files are not valid", bad, len(args))}
			}
			return nil
		},
	}
	vars.add(cmd)
	return cmd
}

// readJob decodes a job file, or stdin for "-", and refuses a job that a
// server would refuse for its size: the decoder applies the limits on the
// file (inputlimit), and the job must fit in one registry record. What the
// file asks that drover does otherwise (a fleet unit's ExecReload=) is
// printed to warnings, valid file or not.
func readJob(path string, stdin io.Reader, warnings io.Writer, vars jobfile.Options) (*spec.Job, error) {
	job, warns, err := decodeJob(path, stdin, vars)
	for _, w := range warns {
		fmt.Fprintf(warnings, "warning: %s\n", w)
	}
	if err != nil {
		return nil, err
	}
	if err := registry.CheckEncodedSize(fmt.Sprintf("job %q", job.Name), job.SpecOnly()); err != nil {
		return nil, fmt.Errorf("%s: %w", displayName(path), err)
	}
	return job, nil
}

func decodeJob(path string, stdin io.Reader, vars jobfile.Options) (*spec.Job, spec.Problems, error) {
	if path == "-" {
		// One byte more than the limit: enough for Decode to refuse.
		b, err := io.ReadAll(io.LimitReader(stdin, inputlimit.MaxBytes+1))
		if err != nil {
			return nil, nil, fmt.Errorf("reading stdin: %w", err)
		}
		return jobfile.DecodeWith("<stdin>", b, vars)
	}
	// DecodeFileWarn says when the file is missing; for a fleet unit such
	// as web@1.service it also looks for the template web@.service.
	return jobfile.DecodeFileWith(path, vars)
}

// jobVars are the -var and -var-file flags of the commands that read job
// files: the values of an HCL job file's variable blocks.
type jobVars struct{ vars, files []string }

func (v *jobVars) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&v.vars, "var", nil, "set a variable of an HCL job file: NAME=VALUE (repeatable; NOMAD_VAR_NAME or DROVER_VAR_NAME in the environment also set it)")
	cmd.Flags().StringArrayVar(&v.files, "var-file", nil, "read variables from a file of NAME = value lines (HCL, or JSON for .json; repeatable)")
}

// options are the flags and the environment, for the decoder.
func (v *jobVars) options() jobfile.Options {
	return jobfile.Options{Vars: v.vars, VarFiles: v.files, Environ: os.Environ()}
}

func displayName(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}
