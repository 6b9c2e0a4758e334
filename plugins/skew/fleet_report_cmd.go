package skew

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// fleetReportCmds are the fleet report's subcommands (inventory).
func fleetReportCmds(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) []*cobra.Command {
	return nil
}
