package skew

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl skew`.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s"}

var example = templates.Examples(`
  # Check the current context against the skew policy
  kubectl skew

  # Plan the hops to v1.37 with skip-level node upgrades
  kubectl skew plan --target v1.37

  # One row per cluster, worst first
  kubectl skew --all-contexts`)

// NewCmd returns the root command of kubectl-skew.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:         "skew",
		Short:       "Check component versions against the Kubernetes version-skew policy and plan upgrades",
		Long:        templates.LongDesc(`Check component versions against the Kubernetes version-skew policy and plan upgrades.`),
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl skew"},
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
