package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// execute runs the command line args (without the program name) on root,
// as main does.
func execute(root *cobra.Command, args []string) error {
	root.SetArgs(singleDashLongFlags(root, args))
	return root.Execute()
}

// singleDashLongFlags accepts Nomad's spelling of long flags with one
// dash (-detach, -purge, -address=URL): a word "-name" or "-name=value"
// where name is a long flag of the command becomes "--name". Anything else
// is left alone: shorthand flags (-o json, -f, -it), the value after a
// flag that takes one (--tail -1), and every argument after "--".
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		cmd = root
	}
	lookup := func(name string) *pflag.Flag {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(name)
	}
	shorthand := func(name string) *pflag.Flag {
		if f := cmd.Flags().ShorthandLookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().ShorthandLookup(name)
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		var f *pflag.Flag
		withValue := strings.Contains(a, "=")
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			f = lookup(name)
		case len(a) == 2 && a[0] == '-':
			f = shorthand(a[1:])
		case len(a) > 2 && a[0] == '-':
			name, _, _ := strings.Cut(a[1:], "=")
			if f = lookup(name); f != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
		// A flag that takes a value takes the next word, whatever it is.
		if f != nil && !withValue && f.NoOptDefVal == "" && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}
