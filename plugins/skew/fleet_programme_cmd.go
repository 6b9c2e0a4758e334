package skew

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// fleetProgrammeCmds are the fleet programme's subcommands (plan, step,
// gate, approve, halt, status, render).
func fleetProgrammeCmds(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) []*cobra.Command {
	return nil
}
