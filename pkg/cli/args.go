package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// argsOf is the arguments part of a command's Use ("RUN|NODE..." of
// "restore RUN|NODE...").
func argsOf(cmd *cobra.Command) string {
	_, args, _ := strings.Cut(cmd.Use, " ")
	return strings.TrimSpace(args)
}

// MinimumArgs is cobra.MinimumNArgs in the suite's words: a usage error
// (exit 2) that names what is missing, with the command's usage line.
func MinimumArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= n {
			return nil
		}
		return WithHint(Usagef("missing %s: %s %s", argsOf(cmd), cmd.CommandPath(), argsOf(cmd)), cmd.CommandPath()+" --help")
	}
}

// MaximumArgs is cobra.MaximumNArgs in the suite's words.
func MaximumArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) <= n {
			return nil
		}
		return WithHint(Usagef("too many arguments (%s): %s takes %s", strings.Join(args, " "), cmd.CommandPath(), argsOf(cmd)), cmd.CommandPath()+" --help")
	}
}
