package skew

import (
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// newFleetCmd is `kubectl skew fleet`: the fleet report (inventory) and the
// fleet programme (plan, step, gate, approve, halt, status, render), all
// over one fleet file (pkg/fleetfile). `fleet` is a subcommand, not a
// plugin of its own: kubectl-fleet is taken in krew's index.
func newFleetCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Report on and upgrade a fleet of clusters, ring by ring",
		Long: "Work on many clusters at once, listed in a fleet file (kind Fleet, gpufleet.dev/v1alpha1) " +
			"or taken from kubeconfig contexts.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(fleetReportCmds(cg, streams, d)...)
	cmd.AddCommand(fleetProgrammeCmds(cg, streams, d)...)
	cmd.AddCommand(newFleetSuperviseCmd(streams))
	return cmd
}

// newFleetSuperviseCmd is the hidden `kubectl skew fleet supervise -- CMD`
// that `fleet step` runs each command under (fleetrun.Supervise): the
// command and what it starts stop when the step dies, however it dies.
func newFleetSuperviseCmd(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:                "supervise -- COMMAND [ARG...]",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				return cli.Usagef("supervise needs a command after --")
			}
			if code := fleetrun.Supervise(args, streams.In, streams.Out, streams.ErrOut, 10*time.Second); code != 0 {
				return &cli.ExitError{Code: code}
			}
			return nil
		},
	}
}
