package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func newEventsCmd(g *globals) *cobra.Command {
	var o client.EventOptions
	var follow bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show the cluster's history: submits, placements, task starts and failures, nodes, deployments, leaders",
		Long: `Events prints the cluster's durable history, oldest first: every job submit
and stop, every instance placed, stopped or evicted (with why), every task
event and status change agents report, nodes registering, going down and
coming back, deployment steps and leader elections. The servers keep it in
etcd for 7 days or 100,000 records, whichever is less (server flags
--event-retention, --event-max-records).

With -f it goes on printing new events as they happen, until Ctrl-C; with
-o json each event is one JSON line (the stream's own format).`,
		Example: "  drover events --since 1h\n  drover events -f --job web\n  drover events --topic node,leader -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if o.Namespace == "" {
				o.Namespace = g.listNamespace()
			}
			out := cmd.OutOrStdout()
			print := func(e spec.Event) error { return printEvent(out, g.output, e) }
			if follow {
				ctx := signalContext(cmd.Context())
				err := c.FollowEvents(ctx, o, print)
				if ctx.Err() != nil {
					return nil // Ctrl-C
				}
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
			defer cancel()
			evs, _, err := c.Events(ctx, o)
			if err != nil {
				return err
			}
			for _, e := range evs {
				if err := print(e); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	cmd.Flags().DurationVar(&o.Since, "since", 0, "only events newer than this, such as 2h or 30m (default: all kept)")
	cmd.Flags().StringSliceVar(&o.Topics, "topic", nil, "only these topics: job, alloc, node, deployment, leader")
	cmd.Flags().StringVar(&o.Job, "job", "", "only this job's events")
	cmd.Flags().StringVar(&o.Node, "node", "", "only this node's events (by name)")
	cmd.Flags().Int64Var(&o.After, "index", 0, "only events after this index (the last one seen)")
	return outputs(cmd, "json")
}

// printEvent writes one event: a line of text, or of JSON.
func printEvent(w io.Writer, format string, e spec.Event) error {
	if format == "json" {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	subject := e.Job
	switch {
	case e.Alloc != "" && e.Task != "":
		subject = e.Alloc + "/" + e.Task
	case e.Alloc != "":
		subject = e.Alloc
	case e.Topic == spec.TopicNode:
		subject = e.Node
	}
	if subject == "" {
		subject = "-"
	}
	_, err := fmt.Fprintf(w, "%s  %-10s  %-12s  %-28s  %s\n", e.Time.Local().Format(time.DateTime), e.Topic, e.Type, subject,
		strings.ReplaceAll(e.Message, "\n", " "))
	return err
}
