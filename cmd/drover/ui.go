package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
)

func newUICmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ui",
		Short: "Print a one-time login link to the web UI, for the token in use",
		Long: `UI asks the server for a one-time login code for the CLI's token and prints
the web UI's link with it. Opening the link logs the browser in as that
token (a session cookie on that server; the token itself never reaches the
page). The link works once, within 10 minutes; a session lasts 12 hours,
until "Log out", or until the server restarts.`,
		Example: "  drover ui\n  drover ui --address https://10.0.0.1:4646 --token $TOKEN",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			code, err := c.UILoginCode(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, client.UILoginLink(c.Address(), code.Code))
			fmt.Fprintf(cmd.ErrOrStderr(), "Open it in a browser (once, before %s). The browser will not know the cluster's CA: accept it, or import ca.pem.\n",
				code.Expires.Local().Format("15:04:05"))
			return nil
		},
	}
}
