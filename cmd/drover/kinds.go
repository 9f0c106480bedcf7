package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

// newPeriodicCmd is `drover periodic` (and `drover job periodic`).
func newPeriodicCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "periodic",
		Short: "Periodic jobs: force a launch now",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "force JOB",
		Short: "Launch a child of a periodic job now, whatever its schedule says",
		Long: `Force launches a child job of the periodic job JOB now, named
JOB@periodic-<unix seconds>, as the leader does at each tick of the job's
schedule; it runs even when the job is disabled (enabled = false) or a
previous child still runs (prohibit_overlap). drover status JOB shows the
children and the next launch.`,
		Example: "  drover periodic force nightly-report",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			child, err := c.ForcePeriodic(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Job %q launched from periodic job %q.\nFollow it with: drover status %s\n", child.Name, args[0], child.Name)
			return nil
		},
	})
	return cmd
}

// newDispatchCmd is `drover dispatch` (and `drover job dispatch`).
func newDispatchCmd(g *globals) *cobra.Command {
	var metas []string
	cmd := &cobra.Command{
		Use:   "dispatch JOB [PAYLOAD-FILE|-]",
		Short: "Run a parameterized job once, with meta and a payload",
		Long: `Dispatch makes a child job of the parameterized job JOB, named
JOB@dispatch-<unix seconds>-<8 hex>, which runs at once. Each -meta KEY=VALUE
is merged over the job's meta (the job's parameterized block says which keys
are required and which are allowed; its tasks see them as NOMAD_META_KEY).
The payload, read from PAYLOAD-FILE or from standard input with -, is written
into the local/ directory of each task with a dispatch_payload block (at
most 16 KiB).`,
		Example: `  drover dispatch video-encode -meta input=s3://bucket/a.mp4
  drover dispatch video-encode params.json
  echo '{"id": 7}' | drover dispatch video-encode -`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := spec.DispatchRequest{}
			for _, m := range metas {
				k, v, ok := strings.Cut(m, "=")
				if !ok || k == "" {
					return fmt.Errorf("-meta %q: write KEY=VALUE", m)
				}
				if req.Meta == nil {
					req.Meta = map[string]string{}
				}
				req.Meta[k] = v
			}
			if len(args) == 2 {
				var err error
				if req.Payload, err = readPayload(cmd.InOrStdin(), args[1]); err != nil {
					return err
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			child, err := c.Dispatch(ctx, args[0], req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Job %q dispatched from %q.\nFollow it with: drover status %s\n", child.Name, args[0], child.Name)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&metas, "meta", nil, "KEY=VALUE meta for the dispatched job (repeatable)")
	return cmd
}

// readPayload reads a dispatch payload from file, or standard input for
// "-", refusing one over spec.MaxPayload.
func readPayload(stdin io.Reader, file string) ([]byte, error) {
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, spec.MaxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w", file, err)
	}
	if len(b) > spec.MaxPayload {
		return nil, fmt.Errorf("payload %s is larger than %d bytes, the limit; pass a smaller file, or a path or URL the task reads", file, spec.MaxPayload)
	}
	return b, nil
}
