package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// refuseUnknownCommands makes every command that groups others (drover
// itself, drover node, drover deployment, ...) refuse a word it has no
// subcommand for, with cobra's suggestions, so a script that mistypes a
// command fails rather than "succeeds" by printing help. Without
// arguments such a command still prints its help.
func refuseUnknownCommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownCommands(sub)
	}
	if !c.HasSubCommands() {
		return
	}
	c.Args = unknownCommand
	// cobra's own default, which it sets only on its own error path.
	c.SuggestionsMinimumDistance = 2
	if c.Run == nil && c.RunE == nil {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// unknownCommand is the Args check of a command that groups others: an
// argument that reached it names no subcommand.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	// Suggestions name the whole command below drover, as it is typed:
	// "deployment list", not "list".
	path := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
	var quoted []string
	for _, s := range cmd.SuggestionsFor(args[0]) {
		quoted = append(quoted, fmt.Sprintf("%q", strings.TrimPrefix(path+" "+s, " ")))
	}
	if len(quoted) > 0 {
		return fmt.Errorf("%s; did you mean %s?", msg, strings.Join(quoted, " or "))
	}
	return fmt.Errorf("%s; %s --help lists its commands", msg, cmd.CommandPath())
}
