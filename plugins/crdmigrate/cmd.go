package crdmigrate

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl crd-migrate`.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s"}

var example = templates.Examples(`
  # Storage state of every CRD
  kubectl crd-migrate status

  # Migrate one CRD, resumably
  kubectl crd-migrate run workloads.kueue.x-k8s.io`)

// NewCmd returns the root command of kubectl-crd_migrate.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:         "crd-migrate",
		Short:       "Rewrite stored custom resources to the storage version and trim storedVersions",
		Long:        templates.LongDesc(`Rewrite stored custom resources to the storage version and trim storedVersions.`),
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl crd-migrate"},
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
