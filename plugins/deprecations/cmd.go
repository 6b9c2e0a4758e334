package deprecations

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl deprecations`.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s"}

var example = templates.Examples(`
  # What the apiserver saw, objects, Helm releases and CRDs, for the next minor
  kubectl deprecations

  # Manifests in a repository, for CI
  kubectl deprecations --ci -f ./deploy`)

// NewCmd returns the root command of kubectl-deprecations.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:         "deprecations",
		Short:       "Find who still uses deprecated or removed Kubernetes APIs",
		Long:        templates.LongDesc(`Find who still uses deprecated or removed Kubernetes APIs.`),
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl deprecations"},
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
