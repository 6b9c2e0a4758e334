package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// Runner is the shape of every command's options: Complete reads flags,
// arguments and builds clients; Validate checks the input without touching
// the network; Run does the work.
type Runner interface {
	Complete(cg ClientGetter, cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// RunE returns the cobra RunE of a command with options o: Complete, then
// Validate (whose errors are usage errors, exit 2, unless one carries its
// own code: an input file refused by InputErr is 3), then Run. Usage is
// printed only for bad input, never for a failure of Run.
func RunE(cg ClientGetter, o Runner) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cg, cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			if IsInputErr(err) {
				return err
			}
			return UsageErr(err)
		}
		cmd.SilenceUsage = true
		return o.Run(cmd.Context())
	}
}
