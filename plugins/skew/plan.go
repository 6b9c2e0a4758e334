package skew

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

var planLong = templates.LongDesc(`
	Plan the upgrade of the current context (or of a saved report) to a target minor.

	The control plane moves one minor at a time, never skipping. Each hop runs
	in the same order: pre-flight checks, an etcd snapshot, the apiservers one
	at a time, the controllers, the addons. Node pools use the kubelet skew on
	purpose: a pool stays where it is until the next hop would put it beyond
	its limit (three minors, two for kubelets older than 1.25), then jumps to
	the control plane's minor, and finally to the target. The plan counts the
	node drains this saves against upgrading nodes at every hop, and warns
	when a pool is left with no slack.

	Every step carries its commands for the cluster's provider, detected from
	what the cluster shows (vendor version suffixes, kube-apiserver static
	pods, Cluster API topology, node provider IDs and labels) or chosen with
	--provider: kubeadm, eks, gke, aks, capi, k3s, rke2 or unknown. A managed
	control plane (EKS, GKE, AKS, Cluster API) has one control-plane step per
	hop and no per-apiserver step (nor etcd step, except on Cluster API).
	Where the provider would roll node pools when the control plane moves
	(Cluster API, Karpenter, EKS Auto Mode, GKE), a hold-rollouts step before
	the hop holds them and each pool's step releases it. Node steps drain one
	node, or on GPU pools one fabric unit, at a time, and end with kubectl
	skew verify --pool and kubectl gpu-validate nodes --kubelet-version, which
	fail when the pool is not on its planned minor. -o wide lists the commands under
	the table, -o json|yaml in each step's "commands", and --runbook prints a
	Markdown runbook with one numbered step and one sh block each.

	With -f (--filename) the plan is made offline from a report saved with
	"kubectl skew -o yaml", and gives the same answer as the live plan.`)

var planExample = templates.Examples(`
	# Plan the hops to v1.37 for the current context
	kubectl skew plan --target v1.37

	# Save the inventory for a change ticket and plan from it offline
	kubectl skew -o yaml > inventory.yaml
	kubectl skew plan -f inventory.yaml --target v1.37 -o yaml

	# A Markdown runbook for the change ticket, commands written for EKS
	kubectl skew plan --target v1.37 --provider eks --runbook > upgrade.md

	# Worker pools made by EC2 Auto Scaling groups: replaced from a new AMI
	kubectl skew plan --target v1.37 --runbook --asg gpu-a=gpu-a-asg --asg cpu=cpu-asg

	# Plan every cluster of the kubeconfig
	for c in $(kubectl config get-contexts -o name); do kubectl skew plan --context "$c" --target v1.37; done`)

// PlanOptions holds the parsed state of `kubectl skew plan`.
type PlanOptions struct {
	// Print holds -o, --no-headers, --color and -q.
	Print *cli.PrintFlags
	// FailOn is the lowest step severity that makes exit code 1.
	FailOn *cli.FailOnFlag

	// Target is the minor to reach (v1.37, 1.37 or v1.37.2), or +N minors
	// after the apiserver.
	Target string
	// relMinors is N of a --target +N, resolved once the apiserver's
	// version is read.
	relMinors int
	// PoolLabel, FromFile, CalendarFile and ChunkSize as for the check.
	PoolLabel    string
	FromFile     string
	CalendarFile string
	ChunkSize    int64
	// ProviderCalendarFile overrides the embedded provider calendar.
	ProviderCalendarFile string
	// Provider overrides the detected provider ("" detects it).
	Provider string
	// Runbook prints the plan as a Markdown runbook.
	Runbook bool
	// ASG are --asg POOL=GROUP values: pools an EC2 Auto Scaling group makes.
	ASG []string
	// HydrateBandwidth are --hydrate-bandwidth SOURCE=RATE values, as
	// gang-drain takes them: an inference pool's drain is planned with
	// them (its waves and ETA).
	HydrateBandwidth []string

	bandwidth inference.Bandwidth

	provider pkgskew.Provider
	asgs     map[string]string
	cg       cli.ClientGetter
	deps     deps
	target   pkgskew.Version
	calendar pkgskew.Calendar
	saved    *SkewReport
	genericiooptions.IOStreams
}

// NewPlanOptions returns PlanOptions with their defaults.
func NewPlanOptions(streams genericiooptions.IOStreams) *PlanOptions {
	return &PlanOptions{Print: cli.NewPrintFlags(), FailOn: cli.NewFailOnFlag(), ChunkSize: 500, IOStreams: streams, deps: defaultDeps()}
}

func newPlanCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := NewPlanOptions(streams)
	o.deps = d
	cmd := &cobra.Command{
		Use:     "plan --target VERSION [flags]",
		Short:   "Plan control-plane hops and skip-level node-pool upgrades to a target minor",
		Long:    planLong,
		Example: planExample,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, pkgskew.Words...)
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
	cli.AddTargetFlag(cmd, &o.Target, "The minor to reach, such as v1.37, or +N minors after the apiserver (+1).", calendarMinors())
	addSourceFlags(cmd, &o.PoolLabel, &o.FromFile, &o.CalendarFile, &o.ChunkSize)
	addProviderCalendarFlag(cmd, &o.ProviderCalendarFile)
	addRunbookFlags(cmd, o)
	cmd.Flags().StringArrayVar(&o.HydrateBandwidth, "hydrate-bandwidth", o.HydrateBandwidth, "The bytes per second each weight source serves the cluster, SOURCE=RATE (object-store, registry, shared-fs), e.g. object-store=1250M/s, as gang-drain run --inference takes it: an inference pool's drain is planned with it (waves and ETA); repeat or separate with commas.")
	return cmd
}

// Complete reads local files and keeps the client getter.
func (o *PlanOptions) Complete(cg cli.ClientGetter, _ *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	cal, err := loadCalendars(o.CalendarFile, o.ProviderCalendarFile)
	if err != nil {
		return err
	}
	o.calendar = cal
	if o.FromFile != "" {
		rep, err := readSaved(o.FromFile, func() ([]byte, error) {
			if o.In == nil {
				return nil, fmt.Errorf("no stdin")
			}
			return io.ReadAll(o.In)
		})
		if err != nil {
			return err
		}
		o.saved = rep
	}
	return nil
}

// Validate checks the flags without touching the network.
func (o *PlanOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.FailOn.Validate(); err != nil {
		return err
	}
	if o.Target == "" {
		return fmt.Errorf("--target is required, for example --target v1.37")
	}
	if rest, ok := strings.CutPrefix(o.Target, "+"); ok {
		// +N: N minors after the apiserver, as kubectl deprecations takes it.
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > 20 {
			return fmt.Errorf("--target %q: want +1, +2 (minors after the apiserver) or a release such as v1.37", o.Target)
		}
		o.relMinors = n
	} else {
		v, err := pkgskew.ParseVersion(o.Target)
		if err != nil {
			return fmt.Errorf("--target %q: want +1, +2 (minors after the apiserver) or a release such as v1.37", o.Target)
		}
		o.target = v
	}
	if o.ChunkSize < 1 {
		return fmt.Errorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	}
	bw, err := inference.ParseBandwidth(o.HydrateBandwidth)
	if err != nil {
		return err
	}
	o.bandwidth = bw
	return o.validateRunbook()
}

// Run builds and prints the plan. Steps or pools at or above --fail-on
// make exit code 1; an impossible target is a usage error.
func (o *PlanOptions) Run(ctx context.Context) error {
	var (
		h   cli.Header
		inv pkgskew.Inventory
	)
	if o.saved != nil {
		h, inv = o.saved.Header, o.saved.Inventory
	} else {
		md, got, err := collectInventory(ctx, o.cg, o.deps, o.PoolLabel, o.ChunkSize, false, true, o.bandwidth)
		if err != nil {
			return err
		}
		h, inv = cli.NewHeader(KindPlanReport, md), got
	}
	h.APIVersion, h.Kind = cli.ReportAPIVersion(KindPlanReport), KindPlanReport
	if o.relMinors > 0 {
		_, newest, ok := inv.APIServerVersions()
		if !ok {
			return cli.ClusterErr(fmt.Errorf("cannot tell the apiserver's version to resolve --target %s: give a release such as v1.37", o.Target))
		}
		o.target = newest.MinorOnly().AddMinors(o.relMinors)
	}
	now := o.deps.now()
	provider := o.provider
	if provider == "" {
		provider = pkgskew.DetectProvider(inv).Provider
	}
	plan, err := pkgskew.MakePlan(inv, o.target, pkgskew.PlanOptions{Provider: o.provider, Providers: &o.calendar.Providers, ASGs: o.asgs, Support: func(v pkgskew.Version) (pkgskew.Support, bool) {
		s := o.calendar.SupportOn(v, provider, now)
		return s, true
	}})
	if errors.Is(err, pkgskew.ErrNoAPIServer) {
		err = fmt.Errorf("planning to %s: %w", o.target.MinorString(), err)
		if o.saved != nil {
			// A local file that cannot be planned is the input's fault.
			return cli.WithHint(cli.UsageErr(fmt.Errorf("%s: %w", o.FromFile, err)), "kubectl skew -o yaml > FILE")
		}
		return cli.ClusterErr(err)
	}
	if err != nil {
		return cli.UsageErr(fmt.Errorf("planning to %s: %w", o.target.MinorString(), err))
	}
	if o.saved != nil {
		// A saved report of the version check holds no inference read:
		// say first that its GPU pools drain as training pools here.
		if w := pkgskew.NoInferenceRead(inv, o.savedName(), o.liveCommand()); w != "" {
			plan.Warnings = append([]string{w}, plan.Warnings...)
		}
	}
	rep := &PlanReport{Header: h, Target: o.target.MinorString(), Provider: plan.Provider, Steps: plan.Steps, Pools: plan.Pools, Warnings: plan.Warnings, Summary: plan.Summary}
	if !o.Print.Quiet {
		if o.Runbook {
			if err := printRunbook(o.Out, rep); err != nil {
				return err
			}
		} else if o.Print.Structured() {
			if err := cli.PrintStructured(o.Out, o.Print.Output, rep); err != nil {
				return err
			}
		} else {
			c := o.Print.Colorizer(o.Out)
			if err := printPlanTable(o.Out, rep, o.Print.TableOptions(), c); err != nil {
				return err
			}
		}
	}
	var sev []cli.Severity
	fixed := map[string]bool{}
	for _, s := range plan.Steps {
		sev = append(sev, SeverityOf(s.Status))
		if s.Status == pkgskew.StatusViolation {
			fixed[s.Pool] = true
		}
	}
	// A pool out of policy that no step repairs (kubelets newer than the
	// apiserver) counts too.
	for _, p := range plan.Pools {
		if p.Status == pkgskew.StatusViolation && !fixed[p.Name] {
			sev = append(sev, cli.SeverityBlocking)
		}
	}
	if n := o.FailOn.Count(sev...); n > 0 {
		return cli.Findings(n)
	}
	return nil
}

// savedName names the report --from-file read, for a warning.
func (o *PlanOptions) savedName() string {
	if o.FromFile == "-" {
		return "the saved report read from stdin"
	}
	return "the saved report " + o.FromFile
}

// liveCommand is the command that plans the same target against the
// cluster, reading its GPU pools for inference workloads, with the
// --hydrate-bandwidth an inference pool's waves and ETA need.
func (o *PlanOptions) liveCommand() string {
	bw := "SOURCE=RATE"
	if len(o.HydrateBandwidth) > 0 {
		bw = strings.Join(o.HydrateBandwidth, ",")
	}
	cmd := fmt.Sprintf("kubectl skew plan --target %s --hydrate-bandwidth %s", o.Target, bw)
	if o.Runbook {
		cmd += " --runbook"
	}
	return cmd + ", against the cluster without --from-file"
}

// calendarMinors are the minors of the embedded calendar, for --target
// completion.
func calendarMinors() []string {
	var out []string
	for _, r := range pkgskew.DefaultCalendar().Releases {
		out = append(out, "v"+r.Minor)
	}
	return out
}
