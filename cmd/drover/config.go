package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/flagfile"
)

// withConfigFiles gives a daemon command (server, agent, dev) --config
// FILE|DIR, repeatable: HCL files whose keys are the command's own flags
// (data_dir for --data-dir; internal/flagfile), read before it runs, a
// later file winning over an earlier one and the command line over both.
func withConfigFiles(cmd *cobra.Command) *cobra.Command {
	var paths []string
	cmd.Flags().StringArrayVar(&paths, "config", nil, "read flags from this HCL `FILE` (each key a flag name with _ for -, such as data_dir = \"/var/lib/drover\"), or from a directory's *.hcl files in lexical order; repeatable, later files win, flags on the command line win over every file")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(paths) > 0 {
			if err := flagfile.Load(configKeys(c), paths); err != nil {
				return err
			}
		}
		return run(c, args)
	}
	return cmd
}

// configKeys are the keys a command's config file takes: its own flags
// but --config and --help (and the hidden ones).
func configKeys(cmd *cobra.Command) map[string]*pflag.Flag {
	return flagfile.Keys(cmd.LocalFlags(), "config", "help")
}
