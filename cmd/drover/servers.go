package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
)

// serverProbe is one row of `drover servers -o json`.
type serverProbe struct {
	Address   string `json:"address"`
	Reachable bool   `json:"reachable"`
	// Leader is the leader as this server sees it ("" when there is none).
	Leader string `json:"leader,omitempty"`
	Error  string `json:"error,omitempty"`
}

// serversOutput is `drover servers -o json`.
type serversOutput struct {
	Leader  string        `json:"leader"`
	Servers []serverProbe `json:"servers"`
}

func newServersCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "servers",
		Short: "Show which server leads, and which of the given servers answer",
		Long: `Servers asks each address in --address (or $DROVER_ADDR; a comma-separated
list) for the current leader. There is no registry of servers yet: it shows
the addresses it was given, whether each answers, and the leader's --name.`,
		Example: "  drover servers --address 10.0.0.1:4646,10.0.0.2:4646,10.0.0.3:4646\n  drover servers -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := g.clientConfig()
			addrs := cfg.Addresses
			if len(addrs) == 0 {
				addrs = []string{client.DefaultAddress}
			}
			out := serversOutput{Servers: make([]serverProbe, len(addrs))}
			var wg sync.WaitGroup
			for i, a := range addrs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					one := cfg
					one.Addresses = []string{a}
					out.Servers[i] = probeServer(cmd.Context(), one)
				}()
			}
			wg.Wait()
			for _, p := range out.Servers {
				if p.Reachable && p.Leader != "" {
					out.Leader = p.Leader
					break
				}
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Leader: %s\n\n", dash(out.Leader))
			t := newTable(w, "ADDRESS", "STATUS", "LEADER SEEN")
			for _, p := range out.Servers {
				st := "ok"
				if !p.Reachable {
					st = "unreachable: " + p.Error
				}
				t.row(p.Address, st, dash(p.Leader))
			}
			t.flush()
			if out.Leader == "" {
				return &exitError{code: exitFailure, err: fmt.Errorf("no server reports a leader"), silent: true}
			}
			return nil
		},
	}, documents...)
}

func probeServer(ctx context.Context, cfg client.Config) serverProbe {
	p := serverProbe{Address: cfg.Addresses[0]}
	c, err := cfg.Client()
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.Address = c.Address()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.Leader(ctx)
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr): // it answers, with an error (no etcd, say)
		p.Reachable, p.Error = true, err.Error()
	case err != nil:
		p.Error = err.Error()
		if inner := errors.Unwrap(err); inner != nil {
			p.Error = inner.Error() // without the "is it running?" advice
		}
	default:
		p.Reachable, p.Leader = true, l
	}
	return p
}
