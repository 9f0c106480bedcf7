package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/jobfile"
)

func newInitCmd() *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:     "init [FILE]",
		Short:   "Write a commented example job file",
		Example: "  drover init            # writes example.hcl\n  drover init --short web.hcl",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "example.hcl"
			if len(args) == 1 {
				path = args[0]
			}
			text := jobfile.Example
			if short {
				text = jobfile.ExampleShort
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if os.IsExist(err) {
				return fmt.Errorf("%s already exists; not overwriting it (give another file name)", path)
			}
			if err != nil {
				return err
			}
			if _, err := f.WriteString(text); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s. Next: drover run %s\n", path, path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&short, "short", false, "write a minimal example without comments")
	return cmd
}
