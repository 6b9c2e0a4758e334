package skew

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

func parseQuantity(s string) (int64, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

var verifyLong = templates.LongDesc(`
	Compare the cluster with the evidence "kubectl skew preflight --save" wrote,
	after the upgrade or after each wave, and report regressions only.

	A regression is: a node not Ready that was Ready (or new); a node not on
	the kubelet minor planned for its pool (--pool POOL=vX.Y, repeatable;
	without it a node must not go back to an older kubelet); a node gone,
	unless its pool is named in --pool (a provider may replace the pool's
	nodes), when the pool must still have a node, as many nodes and as many
	GPUs as in the baseline; a
	kube-system pod unhealthy that was healthy; an addon named in --addon
	that still runs its baseline version; a Warning event in kube-system
	for a reason and object (a pod counts as its DaemonSet or Deployment)
	that did not fire at the baseline, except the events an upgrade causes
	while its pods restart (BackOff, Unhealthy, FailedCreatePodSandBox,
	NetworkNotReady, FailedMount, FailedKillPod, NodeNotReady,
	FailedScheduling), which are a regression only when they keep firing
	longer than --settle-time (listed as WARN while they may still settle);
	a node whose nvidia.com/gpu allocatable dropped; a user of an API removed at the target that was not there
	before.

	Security controls: every admission probe that Pod Security, a webhook,
	a ValidatingAdmissionPolicy or a --probe-file denied at the baseline
	(by its own control or first by another) is sent again (a server-side
	dry run): admitted now is a FAIL naming the namespace or policy; a
	denial by any control that denied the same object at the baseline
	counts; no verdict (a forbidden create, a webhook that fails or hangs
	past --request-timeout) is UNKNOWN. A privileged pod of every
	RuntimeClass new since the baseline is sent where Pod Security enforces
	a level: admitted, its class is exempt (FAIL). The admission
	configuration is diffed: a webhook, policy or denying binding gone,
	failurePolicy Fail turned Ignore, operations, resources or kinds no
	longer matched, a namespace no longer selected (by a new selector or
	new namespace labels), an object selector or matchCondition added or
		changed, a validation dropped, a binding that no longer denies: FAIL.
	RBAC grants that are new since the baseline, except the release's own
	bindings of its own roles: a privilege escalation path of the
	Kubernetes RBAC good practices (listing secrets, workload creation,
	persistent volume creation, nodes/proxy, escalate, bind, impersonate,
	CSR approval and signers, serviceaccounts/token create, admission
	webhook, policy and binding writes, namespace patch), or anything
	granted to system:anonymous or system:unauthenticated, is a FAIL unless
	--allow-grant names the subject, role or binding; other new grants are
	WARN. A Pod Security enforce-version pin now more than one minor behind
	the apiserver, a certificate further into the baseline's thresholds
	than it was (warn window, fail window, expired), an image pinned by
	digest that now runs by tag: WARN (or FAIL for a certificate within
	--cert-fail-days or expired). A kubelet serving certificate request
	new since the baseline and pending longer than --settle-time (core
	Kubernetes never approves them): FAIL.

	Synthetic app (--synthetic-app, or run again when the baseline ran it):
	verify CREATES a probe pod running a minimal HTTP server and a Service in
	--synthetic-app-namespace, calls it through the apiserver's service
	proxy and deletes both, also on an interrupt (a run first deletes what an
	interrupted run left, by label). --synthetic-app-dry-run is its dry run:
	both sent as server-side dry runs, nothing stored or called, listed as
	WARN. No answer is a FAIL; no node that can run it (KWOK fake nodes
	only, or the pod Pending past --synthetic-app-timeout) or a verb RBAC
	refuses is UNKNOWN, unless the baseline was UNKNOWN too.

	Network policy (--network-policy, or when the baseline recorded it):
	every NetworkPolicy, and CiliumNetworkPolicy,
	CiliumClusterwideNetworkPolicy, Calico NetworkPolicy and
	GlobalNetworkPolicy where their CRDs are served, is diffed against the
	baseline by a digest of its spec: gone or changed is a FAIL naming it; a
	kind read at the baseline and not now is UNKNOWN. The enforcing CNI's
	agent DaemonSet (Cilium, GKE Dataplane V2, Calico, Antrea, Weave Net,
	kube-router, Azure NPM, the EKS network policy agent) gone or no longer
	fully ready is a FAIL; a policy new since the baseline is a WARN. The
	network probe (--probe-network, or when the baseline ran it) failing
	is a FAIL; unable to prove anything (no node runs pods) is UNKNOWN.

	Workload identity (--workload-identity, or when the baseline recorded
	it): a ServiceAccount whose dry-run pod no longer gets the token volume
	or environment the identity webhook injected at the baseline is a FAIL
	naming it; so is the GKE metadata server, ready at the baseline, gone or
	not ready. A dry run refused now is UNKNOWN. An EKS Pod Identity
	association of the baseline (--eks-cluster) gone from the EKS API is a
	FAIL naming its namespace/ServiceAccount; the associations not listable
	now (no credentials, access denied) are UNKNOWN.

	FAIL and UNKNOWN items are regressions and exit 1; WARN items are listed
	and exit 0.`)

var verifyExample = templates.Examples(`
	# Before the upgrade
	kubectl skew preflight --target v1.37 --save before.yaml
	# After the wave that moved pool gpu-a to 1.37
	kubectl skew verify --baseline before.yaml --pool gpu-a=v1.37

	# Also deploy, call and delete a probe app (see first what it would create)
	kubectl skew verify --baseline before.yaml --synthetic-app --synthetic-app-dry-run
	kubectl skew verify --baseline before.yaml --synthetic-app`)

// VerifyOptions holds the parsed state of `kubectl skew verify`.
type VerifyOptions struct {
	Print     *cli.PrintFlags
	Baseline  string
	Pools     []string
	Addons    []string
	PoolLabel string
	ChunkSize int64
	// AllowGrants are the --allow-grant patterns.
	AllowGrants []string
	// Settle is --settle-time.
	Settle time.Duration
	// CalendarFile and ProviderCalendarFile are --calendar and
	// --provider-calendar.
	CalendarFile, ProviderCalendarFile string
	calendar                           pkgskew.Calendar

	health healthFlags
	cg     cli.ClientGetter
	deps   deps
	base   *PreflightReport
	pools  map[string]pkgskew.Version
	genericiooptions.IOStreams
}

// VerifyReport is the output of `kubectl skew verify`.
type VerifyReport struct {
	cli.Header
	// Baseline is when the baseline was collected.
	Baseline string                 `json:"baseline"`
	Target   string                 `json:"target,omitempty"`
	Items    []preflight.Regression `json:"items"`
	Summary  struct {
		// Regressions counts the FAIL and UNKNOWN items.
		Regressions int `json:"regressions"`
		// Warnings counts the WARN items.
		Warnings int `json:"warnings"`
	} `json:"summary"`
}

func newVerifyCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &VerifyOptions{Print: cli.NewPrintFlags(), ChunkSize: 500, Settle: preflight.DefaultSettle, IOStreams: streams, deps: d}
	cmd := &cobra.Command{
		Use:     "verify --baseline FILE [flags]",
		Short:   "Report what got worse since the saved pre-flight evidence",
		Long:    verifyLong,
		Example: verifyExample,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, preflight.Words...)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Baseline, "baseline", o.Baseline, "A report saved with kubectl skew preflight --save FILE.")
	cmd.Flags().StringArrayVar(&o.Pools, "pool", o.Pools, "POOL=vX.Y: the kubelet minor planned for a pool after this wave (repeatable).")
	cmd.Flags().StringArrayVar(&o.Addons, "addon", o.Addons, "An addon planned to move in this wave (repeatable): it must no longer run its baseline version.")
	cmd.Flags().StringVar(&o.PoolLabel, "pool-label", o.PoolLabel, "Node label that names node pools (default: the well-known labels).")
	cmd.Flags().Int64Var(&o.ChunkSize, "chunk-size", o.ChunkSize, "Objects per page of each list.")
	cmd.Flags().StringArrayVar(&o.AllowGrants, "allow-grant", o.AllowGrants, "A subject (user, group, namespace/serviceaccount), role or binding name, glob allowed, whose new grants of a privilege escalation path are expected: WARN instead of FAIL (repeatable).")
	cmd.Flags().StringVar(&o.CalendarFile, "calendar", o.CalendarFile, "Release calendar file instead of the embedded one.")
	addProviderCalendarFlag(cmd, &o.ProviderCalendarFile)
	cmd.Flags().DurationVar(&o.Settle, "settle-time", o.Settle, "How long the Warning events an upgrade causes in kube-system (BackOff, Unhealthy, FailedCreatePodSandBox, NetworkNotReady ...) may keep firing before they are a regression.")
	o.health.addFlags(cmd)
	_ = cmd.MarkFlagFilename("baseline", "yaml", "yml", "json")
	return cmd
}

// Complete reads the baseline.
func (o *VerifyOptions) Complete(cg cli.ClientGetter, _ *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	cal, err := loadCalendars(o.CalendarFile, o.ProviderCalendarFile)
	if err != nil {
		return err
	}
	o.calendar = cal
	if o.Baseline == "" {
		return nil
	}
	data, err := cli.ReadInputFile("--baseline", o.Baseline)
	if err != nil {
		return err
	}
	// The kind first: another report's status words are not a gate's,
	// and the error should name the kind, not a word.
	var head cli.Header
	if err := yaml.Unmarshal(data, &head); err != nil {
		return cli.InputFileErr("--baseline", o.Baseline, err)
	}
	if head.Kind != KindPreflightReport || !strings.HasPrefix(head.APIVersion, cli.Group+"/") {
		return cli.InputFileErr("--baseline", o.Baseline, fmt.Errorf("want a %s saved with `kubectl skew preflight --save`, %s", KindPreflightReport, gotKind(head.Kind, head.APIVersion)))
	}
	var rep PreflightReport
	if err := yaml.Unmarshal(data, &rep); err != nil {
		return cli.InputFileErr("--baseline", o.Baseline, err)
	}
	o.base = &rep
	return nil
}

// Validate checks the flags.
func (o *VerifyOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if o.Baseline == "" {
		return fmt.Errorf("--baseline is required: save one with `kubectl skew preflight --target vX.Y --save FILE`")
	}
	o.pools = map[string]pkgskew.Version{}
	for _, p := range o.Pools {
		name, ver, ok := strings.Cut(p, "=")
		v, err := pkgskew.ParseVersion(ver)
		if !ok || name == "" || err != nil {
			return fmt.Errorf("--pool %q: want POOL=vX.Y, such as gpu-a=v1.37", p)
		}
		o.pools[name] = v
	}
	if o.ChunkSize < 1 {
		return fmt.Errorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	}
	if o.Settle <= 0 {
		return fmt.Errorf("--settle-time must be positive, got %s", o.Settle)
	}
	return o.health.validate()
}

// Run collects the current evidence and compares.
func (o *VerifyOptions) Run(ctx context.Context) error {
	r, md, err := runnerFor(ctx, o.cg, o.deps, o.PoolLabel, o.ChunkSize)
	if err != nil {
		return err
	}
	target := o.base.Target
	if v, err := pkgskew.ParseVersion(target); err == nil {
		r.Target = v
	}
	r.Compat, r.Calendar = preflight.DefaultCompat(), o.calendar
	r.Policy.Baseline = o.base.Evidence.Policy
	if r.Policy.Baseline != nil {
		r.Policy.CertWarnDays, r.Policy.CertFailDays = r.Policy.Baseline.CertWarnDays, r.Policy.Baseline.CertFailDays
		if p := r.Policy.Baseline.Patch; p != nil {
			r.Policy.PatchMaxDays = p.MaxDays
		}
	}
	o.health.apply(r, o.base.Evidence.Health)
	res, err := r.Run(ctx)
	if err != nil {
		return cli.ClassifyClusterErr(err, md, "reading the cluster")
	}
	regs := preflight.Verify(o.base.Evidence, res.Evidence, preflight.VerifyOptions{PoolVersions: o.pools, Target: r.Target, Addons: o.Addons, AllowGrants: o.AllowGrants, Settle: o.Settle})
	rep := &VerifyReport{Header: cli.NewHeader(KindVerifyReport, md), Baseline: o.base.Evidence.CollectedAt.UTC().Format("2006-01-02T15:04:05Z"), Target: target, Items: regs}
	if rep.Items == nil {
		rep.Items = []preflight.Regression{}
	}
	for _, it := range regs {
		if it.Status == preflight.StatusWarn {
			rep.Summary.Warnings++
		} else {
			rep.Summary.Regressions++
		}
	}
	if !o.Print.Quiet {
		if o.Print.Structured() {
			if err := cli.PrintStructured(o.Out, o.Print.Output, rep); err != nil {
				return err
			}
		} else if err := printVerifyTable(o.Out, rep, o.Print.TableOptions()); err != nil {
			return err
		}
	}
	if rep.Summary.Regressions > 0 {
		return cli.Findings(rep.Summary.Regressions)
	}
	return nil
}

func printVerifyTable(w io.Writer, rep *VerifyReport, opts cli.TableOptions) error {
	t := cli.Table{Columns: []cli.Column{{Name: cli.StatusColumn}, {Name: "KIND"}, {Name: "OBJECT"}, {Name: "MESSAGE", Shrink: true, Min: 20}, {Name: "COMMAND", Wide: true}}}
	for _, r := range rep.Items {
		t.AddRow(r.Status.Word(), r.Kind, r.Object, r.Message, dash(r.Command))
	}
	if len(rep.Items) > 0 {
		if err := t.Print(w, opts); err != nil {
			return err
		}
	}
	if opts.NoHeaders {
		return nil
	}
	warn := ""
	if rep.Summary.Warnings > 0 {
		warn = "; " + cli.Plural(rep.Summary.Warnings, "warning")
	}
	if len(rep.Items) > 0 {
		// A blank line ends the table, as under every other table.
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintf(w, "%s against the baseline of %s%s\n", cli.Plural(rep.Summary.Regressions, "regression"), rep.Baseline, warn)
	return err
}
