package skew

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// CalendarOptions holds the parsed state of `kubectl skew calendar`.
type CalendarOptions struct {
	Print                *cli.PrintFlags
	CalendarFile         string
	ProviderCalendarFile string
	// Providers prints only the provider calendar (-o yaml of it is a
	// valid --provider-calendar file).
	Providers bool
	calendar  pkgskew.Calendar
	genericiooptions.IOStreams
}

func newCalendarCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &CalendarOptions{Print: cli.NewPrintFlags(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "calendar [flags]",
		Short: "Print the release calendar and the providers' support windows the check judges support with",
		Long: "Print the upstream release calendar (embedded, or --calendar FILE: each minor's release and end of life) and the " +
			"managed providers' own support windows (embedded, or --provider-calendar FILE: EKS, GKE and AKS standard and extended " +
			"support per minor), each with the page it came from and the date it was read. A managed cluster whose minor the provider " +
			"calendar lacks is judged by the upstream end of life. -o yaml prints a valid --calendar file; with --providers, a valid " +
			"--provider-calendar file.",
		Example:     "  kubectl skew calendar\n  kubectl skew calendar --providers -o yaml > providers.yaml\n  kubectl skew --provider-calendar providers.yaml",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cli.OfflineAnnotation: "true"},
		RunE:        cli.RunE(cg, o),
	}
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.CalendarFile, "calendar", o.CalendarFile, "Release calendar file instead of the embedded one.")
	addProviderCalendarFlag(cmd, &o.ProviderCalendarFile)
	cmd.Flags().BoolVar(&o.Providers, "providers", o.Providers, "With -o json|yaml, print the provider calendar instead of the upstream one.")
	_ = cmd.MarkFlagFilename("calendar", "yaml", "yml", "json")
	return cmd
}

// Complete reads the data files.
func (o *CalendarOptions) Complete(_ cli.ClientGetter, _ *cobra.Command, _ []string) error {
	c, err := loadCalendars(o.CalendarFile, o.ProviderCalendarFile)
	if err != nil {
		return err
	}
	o.calendar = c
	return nil
}

// Validate checks the flags.
func (o *CalendarOptions) Validate() error { return o.Print.Validate() }

// Run prints the calendars.
func (o *CalendarOptions) Run(context.Context) error {
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		if o.Providers {
			return cli.PrintStructured(o.Out, o.Print.Output, o.calendar.Providers)
		}
		return cli.PrintStructured(o.Out, o.Print.Output, o.calendar)
	}
	opts := o.Print.TableOptions()
	t := cli.Table{Columns: []cli.Column{{Name: "MINOR"}, {Name: "RELEASED"}, {Name: "END-OF-LIFE"}}}
	for _, r := range o.calendar.Releases {
		t.AddRow(r.Minor, r.Released, r.EndOfLife)
	}
	if err := t.Print(o.Out, opts); err != nil {
		return err
	}
	if !opts.NoHeaders {
		fmt.Fprintf(o.Out, "\nupstream calendar from %s: %s\n\n", o.calendar.DataDate, o.calendar.Source)
	}
	pt := cli.Table{Columns: []cli.Column{{Name: "PROVIDER"}, {Name: "MINOR"}, {Name: "STANDARD-ENDS"}, {Name: "EXTENDED-ENDS"}, {Name: "EXTENDED-NAME"}}}
	for _, p := range o.calendar.Providers.Providers {
		if len(p.Releases) == 0 {
			pt.AddRow(string(p.Provider), "-", "-", "-", p.ExtendedName)
		}
		for _, r := range p.Releases {
			pt.AddRow(string(p.Provider), r.Minor, r.EndOfStandardSupport, dash(r.EndOfExtendedSupport), p.ExtendedName)
		}
	}
	if err := pt.Print(o.Out, opts); err != nil {
		return err
	}
	if opts.NoHeaders {
		return nil
	}
	fmt.Fprintf(o.Out, "\nprovider calendar from %s; a provider or minor not listed falls back to the upstream end of life\n", o.calendar.Providers.DataDate)
	for _, p := range o.calendar.Providers.Providers {
		fmt.Fprintf(o.Out, "%s: %s (read %s)\n", p.Provider.Title(), p.Source, p.Checked)
		for _, n := range p.Notes {
			fmt.Fprintf(o.Out, "  note: %s\n", n)
		}
	}
	return nil
}
