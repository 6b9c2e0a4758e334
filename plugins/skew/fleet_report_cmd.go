package skew

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// fleetReportCmds are the fleet report's subcommands (inventory).
func fleetReportCmds(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) []*cobra.Command {
	return []*cobra.Command{newInventoryCmd(cg, streams, d)}
}

// Output formats of the inventory beyond cli's.
const (
	outputPrometheus = "prometheus"
	outputHTML       = "html"
)

var inventoryLong = templates.LongDesc(`
	One row per cluster of the fleet: provider, control-plane version, the
	newest patch of its minor and how long it has been behind it, end of
	support and the days left, the largest version skew and the node pools
	at the skew limit, every node pool with its kubelet versions and its
	allocatable GPUs (by resource and product label), the ring, and the
	verdict and age of the pre-flight saved in the fleet's store
	(<store>/latest/<cluster>/preflight.json).

	Clusters come from a fleet file (-f, kind Fleet, gpufleet.dev/v1alpha1;
	its rings name each cluster's ring) or from kubeconfig contexts
	(--contexts, --all-contexts). A cluster that is not in the kubeconfig,
	refuses, does not answer within --request-timeout or forbids a read is
	a row with its error; the others are still reported, and the exit code
	is then the worst of theirs (2 configuration, 3 unreachable).

	-o prometheus prints OpenMetrics text (gpufleet_* gauges, cluster and
	ring on every series); --push sends the same metrics to a Prometheus
	Pushgateway, replacing the previous push. -o html prints one
	self-contained page with the table, a support-window timeline per
	cluster and the version spread per ring. The newest patch per minor
	and the support windows come from embedded data files, replaced with
	--patches and --calendar.`)

var inventoryExample = templates.Examples(`
	# Every cluster of the fleet file, worst news first in the PATCH and EOL columns
	kubectl skew fleet inventory -f fleet.yaml

	# The same from every kubeconfig context, as a page for people
	kubectl skew fleet inventory --all-contexts -o html > fleet.html

	# From a CronJob: push the metrics to the Pushgateway
	kubectl skew fleet inventory -f /etc/gpufleet/fleet.yaml -q --push http://pushgateway.monitoring:9091`)

// InventoryOptions holds the parsed state of `kubectl skew fleet inventory`.
type InventoryOptions struct {
	Print    *cli.PrintFlags
	Contexts *cli.ContextFlags

	// FleetFile is the fleet file (-f).
	FleetFile string
	// Store overrides the fleet file's spec.store.url.
	Store string
	// Push is a Pushgateway URL; PushJob its job label.
	Push    string
	PushJob string
	// CalendarFile and PatchesFile replace the embedded data.
	CalendarFile string
	PatchesFile  string
	// ProviderCalendarFile replaces the embedded provider calendar.
	ProviderCalendarFile string
	// PoolLabel and ChunkSize as for `kubectl skew`.
	PoolLabel string
	ChunkSize int64

	cg       cli.ClientGetter
	deps     deps
	fleet    *fleetfile.Fleet
	targets  []fleetreport.Target
	source   string
	calendar pkgskew.Calendar
	genericiooptions.IOStreams
}

func newInventoryCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	// The kubectl on this machine is not part of any cluster's skew.
	d.kubectl = nil
	o := &InventoryOptions{
		Print:     cli.NewPrintFlags(cli.OutputTable, cli.OutputWide, cli.OutputJSON, cli.OutputYAML, outputPrometheus, outputHTML),
		Contexts:  cli.NewContextFlags(),
		PushJob:   "gpufleet_fleet_inventory",
		ChunkSize: 500,
		IOStreams: streams,
		deps:      d,
	}
	cmd := &cobra.Command{
		Use:     "inventory (-f FLEET.yaml | --contexts A,B | --all-contexts) [flags]",
		Short:   "Report version, patch lag, support window, skew, pools and GPUs of every cluster of a fleet",
		Long:    inventoryLong,
		Example: inventoryExample,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, append(pkgskew.Words, cli.StatusError)...)
	o.Print.AddFlags(cmd)
	o.Contexts.AddFlags(cmd)
	cmd.Flags().StringVarP(&o.FleetFile, "filename", "f", o.FleetFile, "Fleet file (kind Fleet, gpufleet.dev/v1alpha1) that lists the clusters.")
	cmd.Flags().StringVar(&o.Store, "store", o.Store, "Store to read saved pre-flights from (file:///dir), instead of the fleet file's spec.store.url.")
	cmd.Flags().StringVar(&o.Push, "push", o.Push, "Also push the metrics to this Prometheus Pushgateway URL (http://host:9091).")
	cmd.Flags().StringVar(&o.PushJob, "push-job", o.PushJob, "The job label of the pushed metrics.")
	cmd.Flags().StringVar(&o.CalendarFile, "calendar", o.CalendarFile, "Release calendar file (YAML or JSON: dataDate, releases[minor, released, endOfLife]) instead of the embedded one.")
	addProviderCalendarFlag(cmd, &o.ProviderCalendarFile)
	cmd.Flags().StringVar(&o.PatchesFile, "patches", o.PatchesFile, "Newest-patch data file (YAML or JSON: dataDate, minors[minor, version, released, asOf, final]) instead of the embedded one.")
	cmd.Flags().StringVar(&o.PoolLabel, "pool-label", o.PoolLabel, "Node label that names node pools (default: the well-known labels of GKE, EKS, AKS, Karpenter and Cluster API).")
	cmd.Flags().Int64Var(&o.ChunkSize, "chunk-size", o.ChunkSize, "Nodes per page when listing nodes.")
	for _, f := range []string{"filename", "calendar", "patches"} {
		_ = cmd.MarkFlagFilename(f, "yaml", "yml", "json")
	}
	return cmd
}

// Complete reads the fleet file and the data files.
func (o *InventoryOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	cal, err := loadCalendars(o.CalendarFile, o.ProviderCalendarFile)
	if err != nil {
		return err
	}
	patches, err := loadDataFile(o.PatchesFile, "--patches", pkgskew.DefaultPatches, pkgskew.ParsePatches)
	if err != nil {
		return err
	}
	o.calendar = cal.WithPatches(patches)
	if o.FleetFile == "" {
		return nil
	}
	f, err := fleetfile.LoadFile(o.FleetFile)
	if err != nil {
		// A fleet file that cannot be read or used is refused as
		// input (exit 3), as every file a flag names.
		return cli.InputErr(fmt.Errorf("-f %w", err))
	}
	o.fleet, o.source = f, o.FleetFile
	o.targets = fleetreport.FleetTargets(f)
	if f.Spec.Store != nil && o.Store == "" {
		o.Store = f.Spec.Store.URL
	}
	// The fleet file may name its kubeconfig, relative to itself.
	kc := f.Spec.Kubeconfig
	if kc != "" && !filepath.IsAbs(kc) {
		kc = filepath.Join(filepath.Dir(o.FleetFile), kc)
	}
	return useFleetKubeconfig(cmd, o.FleetFile, kc)
}

// useFleetKubeconfig makes the fleet file's kubeconfig the command's when
// --kubeconfig is not given: every fleet subcommand reads the clusters
// through the file the fleet names.
func useFleetKubeconfig(cmd *cobra.Command, source, kc string) error {
	if kc == "" || cmd == nil {
		return nil
	}
	fl := cmd.Flag("kubeconfig")
	if fl == nil || fl.Changed {
		return nil
	}
	if err := fl.Value.Set(kc); err != nil {
		return cli.UsageErr(fmt.Errorf("%s: spec.kubeconfig: %v", source, err))
	}
	return nil
}

// Validate checks the flags without touching the network.
func (o *InventoryOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.Contexts.Validate(cli.ContextFlagSet(o.cg)); err != nil {
		return err
	}
	switch {
	case o.FleetFile != "" && o.Contexts.Multi():
		return errors.New("-f cannot be combined with --contexts or --all-contexts")
	case o.FleetFile != "" && cli.ContextFlagSet(o.cg):
		return errors.New("-f cannot be combined with --context: the fleet file names each cluster's context")
	case o.FleetFile == "" && !o.Contexts.Multi():
		return cli.WithHint(errors.New("name the clusters: -f FLEET.yaml, --contexts A,B or --all-contexts"), "kubectl skew fleet inventory --all-contexts")
	case o.ChunkSize < 1:
		return fmt.Errorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	case o.Print.Quiet && o.Print.Output != cli.OutputTable:
		return fmt.Errorf("--quiet cannot be combined with -o %s", o.Print.Output)
	case o.Push != "" && !strings.HasPrefix(o.Push, "http://") && !strings.HasPrefix(o.Push, "https://"):
		return fmt.Errorf("--push %q: want an http:// or https:// Pushgateway URL", o.Push)
	}
	return nil
}

// Run reads the clusters and prints the report.
func (o *InventoryOptions) Run(ctx context.Context) error {
	if o.fleet == nil {
		names := o.Contexts.Contexts
		if o.Contexts.AllContexts {
			var err error
			if names, err = o.Contexts.Resolve(o.cg); err != nil {
				return err
			}
		}
		o.targets, o.source = fleetreport.ContextTargets(names), "kubeconfig contexts"
	}
	opts := fleetreport.Options{
		Targets: o.targets, Getter: o.cg, Parallel: o.Contexts.Parallel, Calendar: o.calendar, Now: o.deps.now,
		Source: o.source, StoreURL: o.Store,
		Collect: func(ctx context.Context, cg cli.ClientGetter) (cli.Metadata, pkgskew.Inventory, error) {
			return collectInventory(ctx, cg, o.deps, o.PoolLabel, o.ChunkSize, true, false, nil)
		},
	}
	if o.fleet != nil {
		opts.Fleet = o.fleet.Metadata.Name
	}
	if o.Store != "" {
		st, err := fleetrun.OpenStore(ctx, o.Store)
		if err != nil {
			return cli.UsageErr(err)
		}
		defer st.Close()
		opts.Store = st
	}
	rep, err := fleetreport.Run(ctx, opts)
	if err != nil {
		return err
	}
	if !o.Print.Quiet {
		for _, c := range rep.Clusters {
			if c.Error != "" {
				fmt.Fprintf(o.ErrOut, "error: cluster %s: %s\n", c.Name, c.Error)
			}
			if p := c.Preflight; p != nil && p.Error != "" {
				fmt.Fprintf(o.ErrOut, "warning: cluster %s: %s (%s)\n", c.Name, p.Error, p.Source)
			}
		}
		if err := o.print(rep); err != nil {
			return err
		}
	}
	var pushErr error
	if o.Push != "" {
		pushErr = fleetreport.Push(ctx, o.Push, o.PushJob, rep)
	}
	code := rep.ExitCode()
	if pushErr != nil {
		code = cli.Worst(code, cli.ExitUnavailable)
		if code == cli.ExitUnavailable {
			return &cli.ExitError{Code: code, Err: pushErr, Hint: "curl -s " + strings.TrimSuffix(o.Push, "/") + "/-/ready"}
		}
		fmt.Fprintf(o.ErrOut, "error: %v\n", pushErr)
	}
	if code == cli.ExitOK {
		return nil
	}
	return &cli.ExitError{Code: code, Err: fmt.Errorf("%d of %d clusters could not be read", rep.Summary.Errors, rep.Summary.Clusters)}
}

func (o *InventoryOptions) print(rep *fleetreport.Report) error {
	switch o.Print.Output {
	case cli.OutputJSON, cli.OutputYAML:
		return cli.PrintStructured(o.Out, o.Print.Output, rep)
	case outputPrometheus:
		return fleetreport.WriteMetrics(o.Out, rep)
	case outputHTML:
		return fleetreport.WriteHTML(o.Out, rep)
	}
	return o.printInventoryTable(rep)
}

func (o *InventoryOptions) printInventoryTable(rep *fleetreport.Report) error {
	c := o.Print.Colorizer(o.Out)
	// Fourteen headers alone are 154 columns: the default view keeps what
	// says whether a cluster needs work (days behind, days left, skew, the
	// pools at the edge, the verdicts) and -o wide adds the provider, the
	// dates and versions behind them and every pool's kubelets.
	t := cli.Table{Columns: []cli.Column{
		{Name: "CLUSTER"}, {Name: "RING"}, {Name: "PROVIDER", Wide: true}, {Name: "VERSION"}, {Name: "LATEST-PATCH", Wide: true}, {Name: "DAYS-BEHIND"},
		{Name: "SUPPORT-ENDS", Wide: true}, {Name: "DAYS-LEFT"}, {Name: "MAX-SKEW"}, {Name: "POOLS-AT-EDGE", Shrink: true}, {Name: "POOLS", Wide: true}, {Name: "GPUS"},
		{Name: "PREFLIGHT"}, {Name: cli.StatusColumn}, {Name: "CONTEXT", Wide: true}, {Name: "NODES", Wide: true}, {Name: "ERROR", Wide: true},
	}}
	for _, cl := range rep.Clusters {
		pf := "-"
		if p := cl.Preflight; p != nil {
			// The verdict is the JSON word (ok, warn, ...); the column
			// prints the table's word, as skew preflight does.
			pf = strings.ToUpper(p.Verdict)
			if p.Error != "" {
				pf = "ERROR"
			} else if p.CollectedAt != nil {
				pf += " " + ageText(p.AgeSeconds)
			}
		}
		if cl.Error != "" {
			t.AddRow(cl.Name, dash(cl.Ring), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", pf, c.Status("ERROR"), cl.Context, "-", cl.Error)
			continue
		}
		latest, behind, eol, left := "-", "-", "-", "-"
		if p := cl.Patch; p != nil && p.Latest != "" {
			latest, behind = p.Latest, strconv.Itoa(p.DaysBehind)
			if p.AtLeast {
				behind = ">=" + behind
			}
		}
		status := pkgskew.StatusOK
		if s := cl.Support; s != nil {
			// The provider's window where it publishes one
			// (Calendar.SupportOn), else the upstream end of life.
			eol = dash(s.SupportEnds)
			if s.DaysToSupportEnd != nil {
				left = strconv.Itoa(*s.DaysToSupportEnd)
			}
			status = s.Status
		}
		if cl.SkewStatus.Rank() > status.Rank() {
			status = cl.SkewStatus
		}
		var pools []string
		for _, p := range cl.Pools {
			var ks []string
			for _, k := range p.Kubelets {
				ks = append(ks, k.Version)
			}
			if p.UnknownKubelets > 0 {
				ks = append(ks, "unknown")
			}
			pools = append(pools, p.Name+"="+strings.Join(ks, "/"))
		}
		version := cl.Version
		if cl.VersionNewest != "" {
			version += ".." + cl.VersionNewest
		}
		t.AddRow(cl.Name, dash(cl.Ring), dash(cl.Provider), dash(version), latest, behind, eol, left, strconv.Itoa(cl.MaxSkew),
			dash(strings.Join(cl.PoolsAtEdge, ",")), dash(strings.Join(pools, " ")), strconv.FormatInt(cl.GPUs, 10), pf,
			c.Status(status.Word()), cl.Context, strconv.Itoa(cl.Nodes), "-")
	}
	return t.Print(o.Out, o.Print.TableOptions())
}

// ageText writes an age in seconds as 3d, 5h or 12m.
func ageText(s int64) string {
	switch {
	case s >= 86400:
		return strconv.FormatInt(s/86400, 10) + "d"
	case s >= 3600:
		return strconv.FormatInt(s/3600, 10) + "h"
	}
	return strconv.FormatInt(s/60, 10) + "m"
}
