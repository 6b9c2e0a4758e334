package skew

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Options holds the parsed state of `kubectl skew`.
type Options struct {
	// Print holds -o, --no-headers, --color and -q.
	Print *cli.PrintFlags
	// FailOn is the lowest severity that makes exit code 1.
	FailOn *cli.FailOnFlag
	// Contexts holds --contexts, --all-contexts and --parallel.
	Contexts *cli.ContextFlags

	// PoolLabel names node pools instead of the well-known labels.
	PoolLabel string
	// FromFile checks a saved report instead of the cluster.
	FromFile string
	// CalendarFile overrides the embedded release calendar.
	CalendarFile string
	// ProviderCalendarFile overrides the embedded provider calendar.
	ProviderCalendarFile string
	// Policy is the fleet rule n or n-K ("" for none).
	Policy string
	// CheckRegistry lists patch releases in Registry.
	CheckRegistry bool
	// Registry is the image registry (or mirror) for --check-registry.
	Registry string
	// ChunkSize is the page size of the node list.
	ChunkSize int64

	cg       cli.ClientGetter
	deps     deps
	calendar pkgskew.Calendar
	policy   *pkgskew.FleetPolicy
	saved    *SkewReport
	genericiooptions.IOStreams
}

// NewOptions returns Options with their defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Print:     cli.NewPrintFlags(),
		FailOn:    cli.NewFailOnFlag(),
		Contexts:  cli.NewContextFlags(),
		Registry:  pkgskew.DefaultRegistry,
		ChunkSize: 500,
		IOStreams: streams,
		deps:      defaultDeps(),
	}
}

// AddFlags registers the check's flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
	o.Contexts.AddFlags(cmd)
	addSourceFlags(cmd, &o.PoolLabel, &o.FromFile, &o.CalendarFile, &o.ChunkSize)
	addProviderCalendarFlag(cmd, &o.ProviderCalendarFile)
	cmd.Flags().StringVar(&o.Policy, "policy", o.Policy, "Also check the fleet rule \"every cluster at N or N-K of the newest supported minor\", written n or n-K (for example n-1).")
	cmd.Flags().BoolVar(&o.CheckRegistry, "check-registry", o.CheckRegistry, "List kube-apiserver image tags in --registry and report how many patch releases behind each component is.")
	cmd.Flags().StringVar(&o.Registry, "registry", o.Registry, "Registry (or mirror) for --check-registry; prefix http:// for a plain-HTTP mirror.")
	_ = cmd.RegisterFlagCompletionFunc("policy", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"n", "n-1", "n-2"}, cobra.ShellCompDirectiveNoFileComp
	})
}

// addSourceFlags registers the flags the check and the plan share.
func addSourceFlags(cmd *cobra.Command, poolLabel, fromFile, calendar *string, chunk *int64) {
	cmd.Flags().StringVar(poolLabel, "pool-label", *poolLabel, "Node label that names node pools (default: the well-known labels of GKE, EKS, AKS, Karpenter and Cluster API).")
	cmd.Flags().StringVarP(fromFile, "filename", "f", *fromFile, "Read a report saved with \"kubectl skew -o yaml\" (or -o json; - for stdin) instead of the cluster. (--from-file is an alias.)")
	cmd.Flags().StringVar(fromFile, "from-file", *fromFile, "Alias of --filename.")
	_ = cmd.Flags().MarkHidden("from-file")
	cmd.Flags().StringVar(calendar, "calendar", *calendar, "Release calendar file (YAML or JSON: dataDate, releases[minor, released, endOfLife]) instead of the embedded one.")
	cmd.Flags().Int64Var(chunk, "chunk-size", *chunk, "Nodes per page when listing nodes.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("calendar", "yaml", "yml", "json")
}

// Complete reads local files and keeps the client getter.
func (o *Options) Complete(cg cli.ClientGetter, _ *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	cal, err := loadCalendars(o.CalendarFile, o.ProviderCalendarFile)
	if err != nil {
		return err
	}
	o.calendar = cal
	if o.FromFile != "" {
		rep, err := readSaved(o.FromFile, o.readStdin)
		if err != nil {
			return err
		}
		o.saved = rep
	}
	return nil
}

func (o *Options) readStdin() ([]byte, error) {
	if o.In == nil {
		return nil, fmt.Errorf("no stdin")
	}
	return io.ReadAll(o.In)
}

func loadCalendar(path string) (pkgskew.Calendar, error) {
	return loadDataFile(path, "--calendar", pkgskew.DefaultCalendar, pkgskew.ParseCalendar)
}

// addProviderCalendarFlag registers --provider-calendar, the sibling of
// --calendar for the managed providers' own support windows.
func addProviderCalendarFlag(cmd *cobra.Command, file *string) {
	cmd.Flags().StringVar(file, "provider-calendar", *file, "Provider support calendar file (YAML or JSON: dataDate, providers[provider, source, releases[minor, endOfStandardSupport, endOfExtendedSupport]]) instead of the embedded one; print it with \"kubectl skew calendar -o yaml\".")
	_ = cmd.MarkFlagFilename("provider-calendar", "yaml", "yml", "json")
}

// loadCalendars reads --calendar and --provider-calendar.
func loadCalendars(calendar, providers string) (pkgskew.Calendar, error) {
	cal, err := loadCalendar(calendar)
	if err != nil {
		return cal, err
	}
	pc, err := loadDataFile(providers, "--provider-calendar", pkgskew.DefaultProviderCalendar, pkgskew.ParseProviderCalendar)
	if err != nil {
		return cal, err
	}
	return cal.WithProviders(pc), nil
}

// loadDataFile reads the data file a flag names, or returns the embedded
// default when the flag is empty. A file that cannot be read, is empty or
// does not parse is refused as input (exit 3).
func loadDataFile[T any](path, flag string, def func() T, parse func([]byte) (T, error)) (T, error) {
	if path == "" {
		return def(), nil
	}
	var zero T
	data, err := cli.ReadInputFile(flag, path)
	if err != nil {
		return zero, err
	}
	v, err := parse(data)
	if err != nil {
		return zero, cli.InputFileErr(flag, path, err)
	}
	return v, nil
}

// Validate checks the flags without touching the network.
func (o *Options) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.FailOn.Validate(); err != nil {
		return err
	}
	if err := o.Contexts.Validate(cli.ContextFlagSet(o.cg)); err != nil {
		return err
	}
	if o.Policy != "" {
		p, err := pkgskew.ParseFleetPolicy(o.Policy)
		if err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
		o.policy = &p
	}
	if o.FromFile != "" && o.Contexts.Multi() {
		return fmt.Errorf("-f cannot be combined with --contexts or --all-contexts")
	}
	if o.ChunkSize < 1 {
		return fmt.Errorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	}
	if o.CheckRegistry && strings.TrimSpace(o.Registry) == "" {
		return fmt.Errorf("--check-registry needs --registry")
	}
	return nil
}

// Run checks the context (or contexts, or the saved file) and prints the
// report. Findings at or above --fail-on make exit code 1.
func (o *Options) Run(ctx context.Context) error {
	if o.Contexts.Multi() {
		return o.runFleet(ctx)
	}
	var (
		rep *SkewReport
		err error
	)
	if o.saved != nil {
		rep = o.evaluate(ctx, o.saved.Header, o.saved.Inventory)
	} else {
		rep, err = o.checkContext(ctx, o.cg)
		if err != nil {
			return err
		}
	}
	if !o.Print.Quiet {
		for _, n := range rep.Inventory.Notes {
			fmt.Fprintf(o.ErrOut, "note: %s\n", n)
		}
	}
	if err := o.printReport(rep); err != nil {
		return err
	}
	if rep.Summary.Findings > 0 {
		return cli.Findings(rep.Summary.Findings)
	}
	return nil
}

// collect reads the inventory of one context.
func collect(ctx context.Context, cg cli.ClientGetter, d deps, poolLabel string, chunk int64, inferencePools bool) (cli.Metadata, pkgskew.Inventory, error) {
	return collectInventory(ctx, cg, d, poolLabel, chunk, false, inferencePools, nil)
}

// collectInventory is collect, also counting each pool's GPUs when gpus
// is set (the fleet report); with inferencePools an inference pool's
// drain is planned with the hydrate bandwidth bw (plan
// --hydrate-bandwidth).
func collectInventory(ctx context.Context, cg cli.ClientGetter, d deps, poolLabel string, chunk int64, gpus, inferencePools bool, bw inference.Bandwidth) (cli.Metadata, pkgskew.Inventory, error) {
	md, err := cli.Connect(ctx, cg)
	if err != nil {
		return md, pkgskew.Inventory{}, err
	}
	kc, err := listClient(cg)
	if err != nil {
		return md, pkgskew.Inventory{}, cli.ClassifyClusterErr(err, md, "building the client")
	}
	// The plan moves the nodes of stateful services first; the fleet
	// report (gpus) plans nothing and reads no more than its RBAC allows.
	c := &pkgskew.Collector{Client: kc, PoolLabel: poolLabel, PageSize: chunk, Kubectl: d.kubectl, Now: d.now, CountGPUs: gpus, Stateful: !gpus}
	if inferencePools {
		// The plan drains a GPU pool of model Deployments behind budgets
		// as an inference pool; the dynamic client lets pkg/gang look for
		// training gangs beside them. Only the plan reads them: the
		// version check does not drain, and keeps to its paged node list
		// and the reads its RBAC names.
		c.Inference = true
		c.InferenceOptions = inference.DefaultOptions()
		c.InferenceOptions.Bandwidth = bw
		if dyn, err := cg.Dynamic(); err == nil {
			c.InferenceDynamic = dyn
		}
	}
	inv, err := c.Collect(ctx)
	if err != nil {
		return md, inv, cli.ClassifyClusterErr(err, md, "reading the version inventory")
	}
	return md, inv, nil
}

func (o *Options) checkContext(ctx context.Context, cg cli.ClientGetter) (*SkewReport, error) {
	md, inv, err := collect(ctx, cg, o.deps, o.PoolLabel, o.ChunkSize, false)
	if err != nil {
		return nil, err
	}
	return o.evaluate(ctx, cli.NewHeader(KindSkewReport, md), inv), nil
}

// evaluate applies the rules, the calendar, the fleet policy and the
// registry to an inventory.
func (o *Options) evaluate(ctx context.Context, h cli.Header, inv pkgskew.Inventory) *SkewReport {
	h.Kind = KindSkewReport
	h.APIVersion = cli.ReportAPIVersion(h.Kind)
	fs, sum := pkgskew.Check(inv)
	rep := &SkewReport{Header: h, Inventory: inv, Summary: Summary{CheckSummary: sum}}
	now := o.deps.now()
	if oldest, _, ok := inv.APIServerVersions(); ok {
		s := o.calendar.SupportOn(oldest, pkgskew.DetectProvider(inv).Provider, now)
		rep.Support = &s
		rep.Summary.DaysToEndOfLife = s.DaysToEndOfLife
		rep.Summary.DaysToSupportEnd = s.DaysToSupportEnd
		rep.Summary.MinorsBehindNewest = s.MinorsBehind
		rep.Summary.SupportWindow = supportPhrase(s)
		switch s.Status {
		case pkgskew.StatusViolation:
			rep.Summary.OutOfSupport++
		case pkgskew.StatusEdge:
			rep.Summary.SupportAtEdge++
		case pkgskew.StatusUnknown:
			rep.Summary.SupportUnknown++
		}
		fs = append(fs, pkgskew.Finding{Component: pkgskew.KindAPIServer, Instance: "support window", Version: oldest.String(),
			Against: s.Newest, Skew: s.MinorsBehind, Rule: pkgskew.RuleSupport, Status: s.Status, Message: s.Message})
		if o.policy != nil {
			if newest, ok := o.calendar.Newest(now); ok {
				pf := o.policy.Check(oldest, newest)
				if pf.Status == pkgskew.StatusViolation {
					rep.Summary.PolicyViolations++
				}
				fs = append(fs, pf)
			} else {
				fs = append(fs, pkgskew.Finding{Component: pkgskew.KindAPIServer, Instance: "policy " + o.policy.String(), Rule: pkgskew.RuleFleetPolicy,
					Status: pkgskew.StatusUnknown, Message: "the release calendar has no release before today"})
			}
		}
	}
	if o.CheckRegistry {
		reg, insecure := registryHost(o.Registry)
		patches, err := pkgskew.PatchCurrency(ctx, inv, o.deps.tags(insecure), reg)
		if err != nil {
			inv.Notes = append(inv.Notes, fmt.Sprintf("--check-registry: %v", err))
			rep.Inventory.Notes = inv.Notes
		}
		rep.Patches = patches
		for _, p := range patches {
			f := pkgskew.Finding{Component: p.Component, Instance: p.Instance, Version: p.Version, Against: p.Latest, Skew: p.PatchesBehind,
				Rule: pkgskew.RulePatchCurrency, Status: pkgskew.StatusInfo}
			switch {
			case p.Latest == "":
				f.Message = "no released patch of this minor in " + reg
			case p.PatchesBehind == 0:
				f.Status = pkgskew.StatusOK
				f.Message = "on the newest patch release"
			default:
				f.Message = fmt.Sprintf("%d patch releases behind %s", p.PatchesBehind, p.Latest)
			}
			fs = append(fs, f)
		}
	}
	pkgskew.SortFindings(fs)
	rep.Items = make([]Item, 0, len(fs))
	for _, f := range fs {
		it := Item{Finding: f, Severity: SeverityOf(f.Status)}
		rep.Items = append(rep.Items, it)
		if o.FailOn.Count(it.Severity) > 0 {
			rep.Summary.Findings++
		}
	}
	// The summary status covers the support window and policy too.
	for _, f := range fs {
		if f.Status.Rank() > rep.Summary.Status.Rank() && f.Status != pkgskew.StatusInfo {
			rep.Summary.Status = f.Status
		}
	}
	return rep
}

func registryHost(r string) (string, bool) {
	r = strings.TrimSpace(r)
	if h, ok := strings.CutPrefix(r, "http://"); ok {
		return strings.TrimSuffix(h, "/"), true
	}
	return strings.TrimSuffix(strings.TrimPrefix(r, "https://"), "/"), false
}
