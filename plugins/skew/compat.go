package skew

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
)

// CompatOptions holds the parsed state of `kubectl skew compat`.
type CompatOptions struct {
	Print      *cli.PrintFlags
	CompatFile string
	compat     preflight.Compat
	genericiooptions.IOStreams
}

func newCompatCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &CompatOptions{Print: cli.NewPrintFlags(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "compat [flags]",
		Short: "Print the addon compatibility table that preflight judges addons with",
		Long: "Print the addon compatibility table (embedded, or --compat FILE): each addon's rule, its releases " +
			"and the Kubernetes minors they support, and the upstream page each row came from. " +
			"The output of -o yaml is a valid --compat file.",
		Example: "  kubectl skew compat -o yaml > compat.yaml\n  kubectl skew preflight --target v1.37 --compat compat.yaml",
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(cg, o),
	}
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.CompatFile, "compat", o.CompatFile, "Compatibility table file instead of the embedded one.")
	return cmd
}

// Complete reads the table.
func (o *CompatOptions) Complete(_ cli.ClientGetter, _ *cobra.Command, _ []string) error {
	c, err := loadCompat(o.CompatFile)
	if err != nil {
		return cli.UsageErr(err)
	}
	o.compat = c
	return nil
}

// Validate checks the flags.
func (o *CompatOptions) Validate() error { return o.Print.Validate() }

// Run prints the table.
func (o *CompatOptions) Run(context.Context) error {
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, o.compat)
	}
	t := cli.Table{Columns: []cli.Column{{Name: "ADDON"}, {Name: "RULE"}, {Name: "RELEASES"}, {Name: "SOURCE"}, {Name: "CHECKED", Wide: true}}}
	for _, a := range o.compat.Addons {
		rel := "-"
		if len(a.Releases) > 0 {
			rel = ""
			for i, r := range a.Releases {
				if i > 0 {
					rel += " "
				}
				if r.Kubernetes != "" {
					rel += r.Kubernetes + ":" + r.Version
				} else {
					rel += fmt.Sprintf("%s:%s..%s", r.Version, r.From, r.To)
				}
			}
		}
		t.AddRow(a.Name, a.Rule, rel, a.Source, dash(a.Checked))
	}
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	_, err := fmt.Fprintf(o.Out, "\ncompatibility data from %s; addons without a row are UNKNOWN in preflight\n", o.compat.DataDate)
	return err
}
