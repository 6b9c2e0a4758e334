package pdbblockers

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl pdb-blockers`.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s"}

var example = templates.Examples(`
  # Which pods would block draining these nodes?
  kubectl pdb-blockers gpu-node-0412 gpu-node-0413

  # Every node, as JSON
  kubectl pdb-blockers --all-nodes -o json`)

// NewCmd returns the root command of kubectl-pdb_blockers.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:         "pdb-blockers",
		Short:       "Show which pods will block a drain, and exactly why",
		Long:        templates.LongDesc(`Show which pods will block a drain, and exactly why.`),
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl pdb-blockers"},
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
