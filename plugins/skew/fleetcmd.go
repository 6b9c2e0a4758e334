package skew

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
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
	return cmd
}
