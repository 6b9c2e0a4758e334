package main

import (
	"errors"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint/agent"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

var long = templates.LongDesc(`
	Answer kubectl gang-drain checkpoint-and-yield requests on the gang's root
	object for a trainer that reads and writes files in --dir (see
	docs/checkpoint-and-yield.md). The agent runs until SIGTERM or SIGINT;
	its log goes to stderr.`) + `

Exit codes:
  0    stopped by SIGTERM or SIGINT
  2    usage or local configuration error (bad flag, no namespace or root object named, --dir missing)
  3    could not reach the cluster, forbidden, or the root object is missing`

var example = templates.Examples(`
	# Beside rank 0 of a JobSet, the pod's namespace and labels from the downward API
	gpufleet-checkpoint-agent --dir /var/run/gpufleet

	# Name the root object, and wake the trainer with SIGUSR1 on a request
	gpufleet-checkpoint-agent -n ml --root PyTorchJob/bert --signal SIGUSR1 --process python`)

// newCmd returns the agent's command with the suite's conventions: help
// on stdout, one error line and a hint on stderr, exit 2 for a bad flag,
// and a version subcommand.
func newCmd(streams genericiooptions.IOStreams) *cobra.Command {
	o := agent.NewOptions()
	cmd := &cobra.Command{
		Use:         "gpufleet-checkpoint-agent [flags]",
		Short:       "Answer gang-drain checkpoint-and-yield requests for a trainer through files",
		Long:        long,
		Example:     example,
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{cli.NoDryRunAnnotation: "it acts only on requests from kubectl gang-drain run, whose --dry-run=client makes none"},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Args = args
			err := o.Run(cmd.Context(), streams.ErrOut)
			var ae *agent.Error
			if errors.As(err, &ae) {
				if ae.Code == agent.ExitUsage {
					return cli.WithHint(cli.UsageErr(ae.Err), "gpufleet-checkpoint-agent --help")
				}
				return cli.ClusterErr(ae.Err)
			}
			return err
		},
	}
	o.AddFlags(cmd.Flags())
	cli.Setup(cmd, streams)
	return cmd
}
