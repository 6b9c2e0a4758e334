package skew

import (
	"context"
	"fmt"
	"strings"
	"time"

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
	now        func() time.Time
	genericiooptions.IOStreams
}

func newCompatCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &CompatOptions{Print: cli.NewPrintFlags(), IOStreams: streams, now: d.now}
	cmd := &cobra.Command{
		Use:   "compat [flags]",
		Short: "Print the addon compatibility table that preflight judges addons with",
		Long: "Print the addon compatibility table (embedded, or --compat FILE): each addon's rule, its releases " +
			"and the Kubernetes minors they support, the upstream page each row came from and the date it was read. " +
			"-o wide adds every release row, what was read and the notes (where a vendor's pages disagree, the stricter is kept). " +
			"The output of -o yaml is a valid --compat file.",
		Example:     "  kubectl skew compat -o yaml > compat.yaml\n  kubectl skew preflight --target v1.37 --compat compat.yaml",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cli.OfflineAnnotation: "true"},
		RunE:        cli.RunE(cg, o),
	}
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.CompatFile, "compat", o.CompatFile, "Compatibility table file instead of the embedded one.")
	_ = cmd.MarkFlagFilename("compat", "yaml", "yml", "json")
	return cmd
}

// Complete reads the table.
func (o *CompatOptions) Complete(_ cli.ClientGetter, _ *cobra.Command, _ []string) error {
	c, err := loadCompat(o.CompatFile)
	if err != nil {
		return err
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
	wide := o.Print.TableOptions().Wide
	// Sources are URLs up to 120 characters: -o wide has them, with every
	// release row and the notes.
	t := cli.Table{Columns: []cli.Column{{Name: "ADDON"}, {Name: "RULE"}, {Name: "RELEASES", Shrink: true, Min: 40}, {Name: "READ"}, {Name: "REVISED", Wide: true}, {Name: "SOURCE", Wide: true}, {Name: "NOTE", Wide: true}, {Name: "CHECKED", Wide: true}}}
	for _, a := range o.compat.Addons {
		t.AddRow(a.Name, a.Rule, compatReleases(a, wide), dash(a.Read), dash(a.Revised), a.Source, dash(a.Note), dash(a.Checked))
	}
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	line := fmt.Sprintf("\ncompatibility data from %s (the newest source revision read)", o.compat.DataDate)
	if now := o.now(); o.compat.Age(now) > 0 {
		line += fmt.Sprintf(" (%s old)", cli.Plural(int(o.compat.Age(now).Hours()/24), "day"))
		if o.compat.Stale(now) {
			line += fmt.Sprintf(", over %s: the addons gate warns until the rows are read again (--compat FILE)", cli.Plural(int(preflight.StaleAfter.Hours()/24), "day"))
		}
	}
	_, err := fmt.Fprintln(o.Out, line+"; an addon without a row, or whose release has none, is UNKNOWN in preflight")
	return err
}

// compatShown is how many release rows a narrow table shows per addon:
// three fit 120 columns.
const compatShown = 3

// compatReleases prints an addon's rows: release:from..to, release:from+
// (no upper bound stated), or kubernetes:version (kubeadm) and
// kubernetes:version+ (oldestRecommended); the newest few unless wide.
func compatReleases(a preflight.CompatAddon, wide bool) string {
	if a.Rule == preflight.RuleNoPublishedRange {
		return "no published range"
	}
	var parts []string
	for _, r := range a.Releases {
		switch {
		case a.Rule == preflight.RuleKubeadm:
			parts = append(parts, r.Kubernetes+":"+r.Version)
		case a.Rule == preflight.RuleOldestRecommended:
			parts = append(parts, r.Kubernetes+":"+r.Version+"+")
		case r.To == "":
			parts = append(parts, r.Version+":"+r.From+"+")
		default:
			parts = append(parts, r.Version+":"+r.From+".."+r.To)
		}
		if len(r.Columns) > 0 {
			// The support table's columns the row comes from.
			parts[len(parts)-1] += "[" + strings.Join(r.Columns, ",") + "]"
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	if !wide && len(parts) > compatShown {
		return strings.Join(parts[:compatShown], " ") + fmt.Sprintf(" (+%d, -o wide)", len(parts)-compatShown)
	}
	return strings.Join(parts, " ")
}
