package gangdrain

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl gang-drain`.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "0"}

var example = templates.Examples(`
  # What a drain of a rack set would do, read-only
  kubectl gang-drain plan -l topology.example.com/rack-set=rs-14

  # Drain it: cordon, checkpoint-and-yield, stop gangs, evict the rest
  kubectl gang-drain run -l topology.example.com/rack-set=rs-14`)

// NewCmd returns the root command of kubectl-gang_drain.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:         "gang-drain",
		Short:       "Drain GPU nodes at a checkpoint boundary, stopping training gangs as a unit",
		Long:        templates.LongDesc(`Drain GPU nodes at a checkpoint boundary, stopping training gangs as a unit.`),
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gang-drain"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cg, cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return cli.UsageErr(err)
			}
			cmd.SilenceUsage = true
			return o.Run(cmd.Context())
		},
	}
	o.Print.AddFlags(cmd)
	cli.BindFlags(cg, cmd)
	cli.Setup(cmd, streams)
	return cmd
}
