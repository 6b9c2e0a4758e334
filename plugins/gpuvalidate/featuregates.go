package gpuvalidate

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

var featureGatesLong = templates.LongDesc(`
	Print the Kubernetes feature gates each minor release removed, which
	the kubelet configuration check (--config-drift) reads: a gate the
	baseline node sets and the upgraded node no longer does, removed by a
	release between their kubelets, is an expected difference (the newer
	kubelet refuses it as an unrecognized feature gate), not drift. The
	data is generated from the release tags of kubernetes/kubernetes and
	carries its source and date; --removed-gates prints a replacement file
	instead, after checking it. -o yaml prints a valid --removed-gates file.`)

// FeatureGatesOptions are the options of `kubectl gpu-validate feature-gates`.
type FeatureGatesOptions struct {
	Print *cli.PrintFlags
	File  string
	genericiooptions.IOStreams
}

func newFeatureGatesCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &FeatureGatesOptions{Print: cli.NewPrintFlags(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:         "feature-gates [flags]",
		Short:       "Print the removed Kubernetes feature gates the kubelet config check uses, with their source and date",
		Long:        featureGatesLong,
		Example:     "  kubectl gpu-validate feature-gates\n  kubectl gpu-validate feature-gates -o yaml > gates.yaml\n  kubectl gpu-validate nodes -l pool=gpu-a --removed-gates gates.yaml",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cli.OfflineAnnotation: "true"},
		RunE:        cli.RunE(cg, o),
	}
	cmd.Flags().StringVar(&o.File, "removed-gates", o.File, "Check and print this removed-gate file instead of the embedded data.")
	_ = cmd.MarkFlagFilename("removed-gates", "yaml", "yml", "json")
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete does nothing: the data needs no cluster.
func (o *FeatureGatesOptions) Complete(cli.ClientGetter, *cobra.Command, []string) error { return nil }

// Validate checks the output flags.
func (o *FeatureGatesOptions) Validate() error { return o.Print.Validate() }

// readRemovedGates reads a --removed-gates file.
// A file that cannot be read, is empty or does not parse is refused as
// input (exit 3), naming the flag and the file.
func readRemovedGates(path string) (*apilifecycle.FeatureGates, error) {
	b, err := cli.ReadInputFile("--removed-gates", path)
	if err != nil {
		return nil, err
	}
	fg, err := apilifecycle.ParseFeatureGates(b)
	if err != nil {
		return nil, cli.InputFileErr("--removed-gates", path, err)
	}
	fg.File = path
	return fg, nil
}

// Run prints the data.
func (o *FeatureGatesOptions) Run(context.Context) error {
	fg := apilifecycle.DefaultFeatureGates()
	if o.File != "" {
		var err error
		if fg, err = readRemovedGates(o.File); err != nil {
			return err
		}
	}
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		// The data itself, so that -o yaml is a valid --removed-gates file.
		return cli.PrintStructured(o.Out, o.Print.Output, fg)
	}
	t := cli.Table{Columns: []cli.Column{{Name: "GATE"}, {Name: "REMOVED-IN"}, {Name: "LAST-STAGE"}}}
	for _, g := range fg.Gates {
		t.AddRow(g.Name, g.RemovedIn.String(), orDash(g.LastStage))
	}
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	if !o.Print.NoHeaders {
		src := "embedded"
		if fg.File != "" {
			src = fg.File
		}
		fmt.Fprintf(o.Out, "\n%d removed gates from %s, tags %v (data of %s; %s)\n", len(fg.Gates), fg.Source, fg.Tags, fg.DataDate, src)
	}
	return nil
}
