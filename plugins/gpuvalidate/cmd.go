package gpuvalidate

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl gpu-validate`.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s"}

var example = templates.Examples(`
  # Gate a wave of upgraded nodes
  kubectl gpu-validate nodes -l pool=h100-a --expected-gpus 8`)

// NewCmd returns the root command of kubectl-gpu_validate.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:         "gpu-validate",
		Short:       "Post-upgrade gates for GPU nodes: GPU count, kubelet config drift, XID, DCGM, NCCL",
		Long:        templates.LongDesc(`Post-upgrade gates for GPU nodes: GPU count, kubelet config drift, XID, DCGM, NCCL.`),
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gpu-validate"},
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
