package skew

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Options holds the parsed state of `kubectl skew`.
type Options struct {
	Print *cli.PrintFlags

	cg cli.ClientGetter
	genericiooptions.IOStreams
}

// NewOptions returns Options with their defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{Print: cli.NewPrintFlags(), IOStreams: streams}
}

// Complete fills in the client getter.
func (o *Options) Complete(cg cli.ClientGetter, _ *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	return nil
}

// Validate checks the flags without touching the network.
func (o *Options) Validate() error {
	return o.Print.Validate()
}

// Run connects to the cluster.
func (o *Options) Run(ctx context.Context) error {
	_, err := cli.Connect(ctx, o.cg)
	return err
}
