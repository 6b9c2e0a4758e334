package gpuvalidate

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
)

var xidCatalogLong = templates.LongDesc(`
	Print the Xid catalog that --xid judges by: NVIDIA's published table
	(every Xid with its immediate and investigatory actions and the page it
	came from), the class the gate gives each one, the source and the date
	of the data. --xid-catalog prints a replacement file instead, after
	checking it.`)

// XidCatalogOptions are the options of `kubectl gpu-validate xid-catalog`.
type XidCatalogOptions struct {
	Print *cli.PrintFlags
	File  string
	genericiooptions.IOStreams
}

// XidCatalogReport is the catalog as printed (kind XidCatalog).
type XidCatalogReport struct {
	cli.Header
	*gpucheck.XidCatalog
}

func newXidCatalogCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &XidCatalogOptions{Print: cli.NewPrintFlags(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:         "xid-catalog [flags]",
		Short:       "Print the Xid catalog the --xid gate uses, with its source and date",
		Long:        xidCatalogLong,
		Example:     "  kubectl gpu-validate xid-catalog\n  kubectl gpu-validate xid-catalog -o json | jq '.entries[] | select(.class==\"fatal\") | .xid'",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cli.OfflineAnnotation: "true"},
		RunE:        cli.RunE(cg, o),
	}
	cmd.Flags().StringVar(&o.File, "xid-catalog", o.File, "Check and print this catalog file instead of the embedded one.")
	_ = cmd.MarkFlagFilename("xid-catalog", "csv")
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete does nothing: the catalog needs no cluster.
func (o *XidCatalogOptions) Complete(cli.ClientGetter, *cobra.Command, []string) error { return nil }

// Validate checks the output flags.
func (o *XidCatalogOptions) Validate() error { return o.Print.Validate() }

// readXidCatalog reads an --xid-catalog file. A file that cannot be read,
// is empty or does not parse is refused as input (exit 3), naming the flag
// and the file.
func readXidCatalog(path string) (*gpucheck.XidCatalog, error) {
	b, err := cli.ReadInputFile("--xid-catalog", path)
	if err != nil {
		return nil, err
	}
	c, err := gpucheck.ParseXidCatalog(b)
	if err != nil {
		return nil, cli.InputFileErr("--xid-catalog", path, err)
	}
	c.File = path
	return c, nil
}

// Run prints the catalog.
func (o *XidCatalogOptions) Run(context.Context) error {
	c := gpucheck.DefaultXidCatalog()
	if o.File != "" {
		var err error
		if c, err = readXidCatalog(o.File); err != nil {
			return err
		}
	}
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, XidCatalogReport{Header: cli.NewHeader("XidCatalog", cli.Metadata{}), XidCatalog: c})
	}
	t := cli.Table{Columns: []cli.Column{{Name: "XID"}, {Name: "CLASS"}, {Name: "IMMEDIATE-ACTION", Shrink: true, Min: 20}, {Name: "MNEMONIC", Wide: true},
		{Name: "INVESTIGATORY ACTION", Wide: true}, {Name: "DESCRIPTION", Shrink: true, Min: 20}}}
	for _, e := range c.Entries {
		action, class := e.ImmediateAction, e.ClassHere()
		if action == "" {
			action = "-"
		}
		inv := e.InvestigatoryAction
		if inv == "" {
			inv = "-"
		}
		t.AddRow(fmt.Sprint(e.Code), class, action, e.Mnemonic, inv, e.Description)
	}
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	if !o.Print.NoHeaders {
		src := "embedded"
		if c.File != "" {
			src = c.File
		}
		fmt.Fprintf(o.Out, "\n%s from %s (sheet %s, checked %s; %s); Xid 144-150 decode: %s (-o yaml)\n", cli.Plural(len(c.Entries), "Xid"), c.Source, orDash(c.SheetDate), orDash(c.Checked), src, cli.Plural(len(c.NVLink5Decode), "row"))
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
