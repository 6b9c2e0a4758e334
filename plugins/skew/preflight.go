package skew

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Report kinds of preflight and verify.
const (
	KindPreflightReport     = "SkewPreflightReport"
	KindPreflightReportList = "SkewPreflightReportList"
	KindVerifyReport        = "SkewVerifyReport"
)

var preflightLong = templates.LongDesc(`
	Run every pre-flight gate of an upgrade to --target against the live cluster.

	One row per gate, PASS, WARN, FAIL or UNKNOWN, with its evidence and the
	command that fixes or investigates it: the target's support window;
	APIs removed at the target still in use (apiserver metric, object
	writers, Helm releases, CRDs, as kubectl deprecations reads them); addons
	found by image, workload or Helm release against the compatibility table
	(kubectl skew compat; data over 120 days old warns, UNKNOWN names the
	command to check by hand); admission and conversion webhooks that fail closed and cannot
	be reached, or intercept kube-system, nodes or leases, or wait long;
	etcd's /readyz and database size against the quota of where etcd runs
	(EKS's 8 GiB, etcd's 2 GiB default on a control plane of the cluster's
	own, none published by GKE and AKS; --etcd-quota overrides), FAIL above
	60%, this tool's policy;
	every node Ready; kube-system pods not crash-looping or Pending; drains
	that will block, per pool (as kubectl pdb-blockers predicts them); CRDs
	whose storedVersions need a migration (kubectl crd-migrate); namespaces
	whose Pod Security labels say latest; legacy service-account token
	Secrets still in use.

	Security controls, recorded for verify: Pod Security enforce-version pins
	more than one minor behind the target; admission probes, server-side
	dry-run creates (nothing is stored) of a pod each namespace's Pod
	Security level forbids, of objects each webhook (sideEffects None or
	NoneOnDryRun) and each denying ValidatingAdmissionPolicy binding is
	shown, and of the manifests in --probe-file (for policies no probe can
	be built for, such as an image signature policy: give a pod running an
	unsigned image); every role and binding, and who outside system: holds
	a privilege escalation path of the Kubernetes RBAC good practices
	(secrets, workload or persistent volume creation, nodes/proxy,
	escalate, bind, impersonate, certificate approval, token requests,
	admission control writes, namespace patch); the cluster's days behind
	the newest patch of its minor (--patch-max-days, the patch data of
	--patches) and its minor's support, on the provider's own calendar
	where it has one (EKS extended support, AKS LTS; --provider-calendar),
	out of support being a warning that points at the plan; the apiserver's serving
	certificate and the cluster CA (--cert-warn-days, --cert-fail-days), and
	on kubeadm the command that checks the rest; images of control-plane
	static pods, kube-system and the GPU stack run by tag, not digest. The
	probes need the create verb on what they send (deploy/rbac/skew-probes.yaml);
	without it they are UNKNOWN naming the verb.

	The synthetic app (--synthetic-app) CREATES objects: a probe pod running
	a minimal HTTP server and a Service, in --synthetic-app-namespace, called
	through the apiserver's service proxy and then deleted (also on an
	interrupt; a run first deletes what an interrupted run left, by label).
	--synthetic-app-dry-run sends both as server-side dry runs instead
	(nothing stored or called: WARN). No answer is FAIL; no node that can
	run it (KWOK fake nodes only, or the pod Pending past
	--synthetic-app-timeout) is UNKNOWN. It needs
	deploy/rbac/skew-synthetic-app.yaml bound in its namespace.

	The network-policy gate (--network-policy) records every NetworkPolicy,
	and the Cilium and Calico policy kinds where their CRDs are served, by a
	digest of its spec, and the enforcing CNI's agent DaemonSet, for verify
	to diff: agent pods not ready is FAIL; policies with no known enforcing
	CNI is WARN. --probe-network also runs a server and a client pod in a
	scratch namespace and proves a default deny denies and an allow allows
	(FAIL when not; UNKNOWN where no node runs pods, such as KWOK), then
	deletes the namespace; --probe-network-dry-run lists what it would
	create (deploy/rbac/skew-network-probe.yaml).

	The workload-identity gate (--workload-identity) sends a pod with each
	ServiceAccount annotated for EKS IRSA (eks.amazonaws.com/role-arn) or
	Azure Workload ID (azure.workload.identity/client-id) as a server-side
	dry run and records the token volume and environment the identity
	webhook injected; for GKE (iam.gke.io/gcp-service-account), which
	injects nothing, the gke-metadata-server DaemonSet. Nothing injected is
	WARN; a dry run refused is UNKNOWN naming the verb. --eks-cluster (with
	--eks-region) also lists that EKS cluster's Pod Identity associations
	through the EKS API and probes each association's ServiceAccount;
	unreachable (no AWS credentials, access denied) is UNKNOWN naming why.

	A gate that cannot read what it needs is UNKNOWN with the verb and
	resource, and the others still run. --save writes the whole report with
	its evidence, which "kubectl skew verify --baseline" compares against
	after each wave. FAIL exits 1; --fail-on=warning also counts WARN and
	UNKNOWN.`)

var preflightExample = templates.Examples(`
	# Gates for the upgrade to v1.37, evidence saved for the change ticket
	kubectl skew preflight --target v1.37 --save before.yaml

	# Every cluster of the kubeconfig, worst first
	kubectl skew preflight --target v1.37 --all-contexts

	# In a script: exit 1 on any FAIL, WARN or UNKNOWN
	kubectl skew preflight --target v1.37 --fail-on warning -q

	# Also prove an image signature policy denies an unsigned image
	kubectl skew preflight --target v1.37 --probe-file unsigned-pod.yaml --save before.yaml

	# Record PromQL checks (apiserver latency, TTFT...) as the baseline verify judges
	kubectl skew preflight --target v1.37 --prometheus-url http://127.0.0.1:9090 --promql-checks checks.yaml --save before.yaml`)

// PreflightOptions holds the parsed state of `kubectl skew preflight`.
type PreflightOptions struct {
	Print    *cli.PrintFlags
	FailOn   *cli.FailOnFlag
	Contexts *cli.ContextFlags

	Target       string
	Save         string
	CompatFile   string
	CalendarFile string
	// ProviderCalendarFile is --provider-calendar.
	ProviderCalendarFile string
	PoolLabel            string
	EtcdQuota            string
	ChunkSize            int64
	policy               policyFlags
	health               healthFlags

	cg       cli.ClientGetter
	deps     deps
	target   pkgskew.Version
	compat   preflight.Compat
	calendar pkgskew.Calendar
	quota    int64
	genericiooptions.IOStreams
}

// PreflightGate is one row of the report with its severity.
type PreflightGate struct {
	preflight.Gate
	Severity cli.Severity `json:"severity"`
}

// PreflightSummary totals a PreflightReport.
type PreflightSummary struct {
	Status   preflight.Status `json:"status"`
	Pass     int              `json:"pass"`
	Warn     int              `json:"warn"`
	Fail     int              `json:"fail"`
	Unknown  int              `json:"unknown"`
	Findings int              `json:"findings"`
}

// PreflightReport is the output of `kubectl skew preflight`; saved with
// --save it is the baseline of `kubectl skew verify`.
type PreflightReport struct {
	cli.Header
	Target   string             `json:"target"`
	Items    []PreflightGate    `json:"items"`
	Evidence preflight.Evidence `json:"evidence"`
	Summary  PreflightSummary   `json:"summary"`
}

// GateSeverity maps a gate status to the severity --fail-on compares.
func GateSeverity(s preflight.Status) cli.Severity {
	switch s {
	case preflight.StatusFail:
		return cli.SeverityBlocking
	case preflight.StatusWarn, preflight.StatusUnknown:
		return cli.SeverityWarning
	}
	return cli.SeverityNone
}

func newPreflightCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &PreflightOptions{Print: cli.NewPrintFlags(), FailOn: cli.NewFailOnFlag(), Contexts: cli.NewContextFlags(), ChunkSize: 500, IOStreams: streams, deps: d}
	cmd := &cobra.Command{
		Use:     "preflight --target VERSION [flags]",
		Short:   "Run the pre-flight gates of an upgrade to a target minor, with evidence",
		Long:    preflightLong,
		Example: preflightExample,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, preflight.Words...)
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
	o.Contexts.AddFlags(cmd)
	cli.AddTargetFlag(cmd, &o.Target, "The minor to reach, such as v1.37.", calendarMinors())
	cmd.Flags().StringVar(&o.Save, "save", o.Save, "Write the whole report with its evidence (YAML) to this file, the baseline of kubectl skew verify (through a temporary file in the same directory: a failed save leaves the file already there as it was).")
	cmd.Flags().StringVar(&o.CompatFile, "compat", o.CompatFile, "Addon compatibility table file (YAML or JSON, as kubectl skew compat -o yaml prints it) instead of the embedded one.")
	cmd.Flags().StringVar(&o.CalendarFile, "calendar", o.CalendarFile, "Release calendar file instead of the embedded one.")
	addProviderCalendarFlag(cmd, &o.ProviderCalendarFile)
	cmd.Flags().StringVar(&o.PoolLabel, "pool-label", o.PoolLabel, "Node label that names node pools (default: the well-known labels).")
	cmd.Flags().StringVar(&o.EtcdQuota, "etcd-quota", o.EtcdQuota, "etcd's backend quota (--quota-backend-bytes); default: EKS's 8Gi, etcd's 2Gi on a control plane of the cluster's own. The etcd gate fails above 60% of it.")
	cmd.Flags().Int64Var(&o.ChunkSize, "chunk-size", o.ChunkSize, "Objects per page of each list.")
	o.policy.addFlags(cmd)
	o.health.addFlags(cmd)
	_ = cmd.MarkFlagFilename("save", "yaml", "yml")
	cli.MarkOutputFile(cmd, "save")
	_ = cmd.MarkFlagFilename("compat", "yaml", "yml", "json")
	return cmd
}

// Complete reads local files.
func (o *PreflightOptions) Complete(cg cli.ClientGetter, _ *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	cal, err := loadCalendars(o.CalendarFile, o.ProviderCalendarFile)
	if err != nil {
		return err
	}
	o.calendar = cal
	c, err := loadCompat(o.CompatFile)
	if err != nil {
		return err
	}
	o.compat = c
	if o.calendar, err = o.policy.complete(o.calendar); err != nil {
		return err
	}
	return nil
}

func loadCompat(path string) (preflight.Compat, error) {
	return loadDataFile(path, "--compat", preflight.DefaultCompat, preflight.ParseCompat)
}

// Validate checks the flags without touching the network.
func (o *PreflightOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.FailOn.Validate(); err != nil {
		return err
	}
	if err := o.Contexts.Validate(cli.ContextFlagSet(o.cg)); err != nil {
		return err
	}
	if o.Target == "" {
		return fmt.Errorf("--target is required, for example --target v1.37")
	}
	v, err := pkgskew.ParseVersion(o.Target)
	if err != nil {
		return fmt.Errorf("--target: %w", err)
	}
	o.target = v.MinorOnly()
	if o.EtcdQuota != "" {
		q, err := parseQuantity(o.EtcdQuota)
		if err != nil || q <= 0 {
			return fmt.Errorf("--etcd-quota %q: want a size such as 2Gi or 8589934592", o.EtcdQuota)
		}
		o.quota = q
	}
	if o.ChunkSize < 1 {
		return fmt.Errorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	}
	if err := o.policy.validate(); err != nil {
		return err
	}
	if err := o.health.validate(); err != nil {
		return err
	}
	if o.Save != "" && o.Contexts.Multi() {
		return fmt.Errorf("--save cannot be combined with --contexts or --all-contexts: save one context at a time")
	}
	return nil
}

// runner builds the preflight runner of one context.
func runnerFor(ctx context.Context, cg cli.ClientGetter, d deps, poolLabel string, chunk int64) (*preflight.Runner, cli.Metadata, error) {
	md, err := cli.Connect(ctx, cg)
	if err != nil {
		return nil, md, err
	}
	kc, err := listClient(cg)
	if err != nil {
		return nil, md, cli.ClassifyClusterErr(err, md, "building the client")
	}
	r := &preflight.Runner{Kube: kc, PoolLabel: poolLabel, PageSize: chunk, Now: d.now, Kubectl: d.kubectl}
	if dyn, err := cg.Dynamic(); err == nil {
		r.Dynamic = dyn
	}
	if dc, err := cg.Discovery(); err == nil {
		r.Discovery = dc
	}
	if ec, err := cg.APIExtensions(); err == nil {
		r.Ext = ec
	}
	if _, real := kc.(*kubernetes.Clientset); real {
		r.Stream = true
		r.Policy.ServingCertificates = servingCertificates(cg)
		if cfg, err := cg.ToRESTConfig(); err == nil {
			r.Metadata, _ = metadata.NewForConfig(cfg)
			r.StreamTimeout = cfg.Timeout
		}
	}
	r.Raw = preflight.RawFromStream(func(ctx context.Context, path string) (io.ReadCloser, error) {
		base, err := cg.Kube()
		if err != nil {
			return nil, err
		}
		rc, ok := base.Discovery().RESTClient().(*rest.RESTClient)
		if !ok || rc == nil {
			return nil, errors.New("no REST client")
		}
		// path may carry a query (/metrics?name[]=...): AbsPath keeps the
		// kubeconfig server's own path prefix, Param the query.
		u, err := url.Parse(path)
		if err != nil {
			return nil, err
		}
		req := rc.Get().AbsPath(u.Path)
		for k, vs := range u.Query() {
			for _, v := range vs {
				req = req.Param(k, v)
			}
		}
		return req.Stream(ctx)
	})
	return r, md, nil
}

func (o *PreflightOptions) check(ctx context.Context, cg cli.ClientGetter) (*PreflightReport, error) {
	r, md, err := runnerFor(ctx, cg, o.deps, o.PoolLabel, o.ChunkSize)
	if err != nil {
		return nil, err
	}
	r.Target, r.Compat, r.Calendar, r.EtcdQuota = o.target, o.compat, o.calendar, o.quota
	o.policy.apply(r)
	o.health.apply(r, nil)
	res, err := r.Run(ctx)
	if err != nil {
		return nil, cli.ClassifyClusterErr(err, md, "reading the version inventory")
	}
	if _, newest, ok := res.Evidence.Inventory.APIServerVersions(); ok && newest.MinorOnly().MinorsAfter(o.target) > 0 {
		return nil, cli.UsageErr(fmt.Errorf("--target %s is older than the apiserver %s: preflight checks upgrades, not downgrades", o.target.MinorString(), newest.MinorString()))
	}
	rep := &PreflightReport{Header: cli.NewHeader(KindPreflightReport, md), Target: o.target.MinorString(), Evidence: res.Evidence}
	rep.Summary.Status = preflight.StatusPass
	for _, g := range res.Gates {
		it := PreflightGate{Gate: g, Severity: GateSeverity(g.Status)}
		rep.Items = append(rep.Items, it)
		switch g.Status {
		case preflight.StatusPass:
			rep.Summary.Pass++
		case preflight.StatusWarn:
			rep.Summary.Warn++
		case preflight.StatusFail:
			rep.Summary.Fail++
		default:
			rep.Summary.Unknown++
		}
		rep.Summary.Status = preflight.Worse(rep.Summary.Status, g.Status)
		if o.FailOn.Count(it.Severity) > 0 {
			rep.Summary.Findings++
		}
	}
	return rep, nil
}

// Run runs the gates and prints the report.
func (o *PreflightOptions) Run(ctx context.Context) error {
	if o.Contexts.Multi() {
		return o.runFleet(ctx)
	}
	rep, err := o.check(ctx, o.cg)
	if err != nil {
		return err
	}
	if !o.Print.Quiet {
		for _, n := range rep.Evidence.Inventory.Notes {
			fmt.Fprintf(o.ErrOut, "note: %s\n", n)
		}
	}
	if o.Save != "" {
		if err := saveReport(o.Save, rep); err != nil {
			return cli.UsageErr(err)
		}
	}
	if !o.Print.Quiet {
		if o.Print.Structured() {
			if err := cli.PrintStructured(o.Out, o.Print.Output, rep); err != nil {
				return err
			}
		} else if err := printPreflightTable(o.Out, rep, o.Print.TableOptions(), o.Print.Colorizer(o.Out), ""); err != nil {
			return err
		}
	}
	if rep.Summary.Findings > 0 {
		return cli.Findings(rep.Summary.Findings)
	}
	return nil
}

// saveReport writes rep as YAML to a temporary file (mode 0600) in path's
// directory and renames it over path, so a report that fails to encode or
// a write cut short leaves the baseline already there whole.
func saveReport(path string, rep any) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	tmp := f.Name()
	err = cli.PrintStructured(f, cli.OutputYAML, rep)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("--save %s: %w (any file already there is left as it was)", path, err)
	}
	return nil
}

func (o *PreflightOptions) runFleet(ctx context.Context) error {
	names, err := o.Contexts.Resolve(o.cg)
	if err != nil {
		return err
	}
	results := cli.FanOutReachable(ctx, o.cg, names, o.Contexts.Parallel, func(ctx context.Context, name string) (*PreflightReport, error) {
		return o.check(ctx, o.cg.ForContext(name))
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	items := make([]cli.ContextReport, 0, len(results))
	var codes []int
	findings := 0
	for _, r := range results {
		cr := cli.ContextReport{Context: r.Context}
		if r.Err != nil {
			cr.Error, cr.ExitCode = r.Err.Error(), cli.ExitCode(r.Err)
		} else {
			cr.Report = r.Value
			if r.Value.Summary.Findings > 0 {
				cr.ExitCode = cli.ExitFindings
				findings += r.Value.Summary.Findings
			}
		}
		codes = append(codes, cr.ExitCode)
		items = append(items, cr)
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if (a.Error != "") != (b.Error != "") {
			return a.Error != ""
		}
		ra, _ := a.Report.(*PreflightReport)
		rb, _ := b.Report.(*PreflightReport)
		if ra != nil && rb != nil && ra.Summary.Status.Rank() != rb.Summary.Status.Rank() {
			return ra.Summary.Status.Rank() > rb.Summary.Status.Rank()
		}
		return a.Context < b.Context
	})
	if !o.Print.Quiet {
		for _, it := range items {
			if it.Error != "" {
				fmt.Fprintf(o.ErrOut, "error: context %s: %s\n", it.Context, it.Error)
			}
		}
		if o.Print.Structured() {
			if err := cli.PrintStructured(o.Out, o.Print.Output, cli.ReportList{APIVersion: cli.ReportAPIVersion(KindPreflightReportList), Kind: KindPreflightReportList, Items: items}); err != nil {
				return err
			}
		} else {
			first := true
			for _, it := range items {
				rep, _ := it.Report.(*PreflightReport)
				if rep == nil {
					continue
				}
				opts := o.Print.TableOptions()
				opts.NoHeaders = opts.NoHeaders || !first
				if err := printPreflightTable(o.Out, rep, opts, o.Print.Colorizer(o.Out), it.Context); err != nil {
					return err
				}
				first = false
			}
		}
	}
	switch w := cli.Worst(codes...); w {
	case cli.ExitOK:
		return nil
	case cli.ExitFindings:
		return cli.Findings(findings)
	default:
		return &cli.ExitError{Code: w, Err: errors.New("some contexts could not be checked")}
	}
}

func printPreflightTable(w io.Writer, rep *PreflightReport, opts cli.TableOptions, c cli.Colorizer, context string) error {
	// A gate's command is pasted, never shortened, and many are longer
	// than a terminal: -o wide has every gate's in COMMAND, the default
	// view prints those of the gates that did not pass whole, each on a
	// line of its own under the table, and the message gets the width.
	cols := []cli.Column{{Name: "GATE"}, {Name: cli.StatusColumn}, {Name: "MESSAGE", Shrink: true, Min: 30}, {Name: "COMMAND", Wide: true}, {Name: "EVIDENCE", Wide: true}}
	if context != "" {
		cols = append([]cli.Column{{Name: "CONTEXT"}}, cols...)
	}
	t := cli.Table{Columns: cols}
	var cmds []string
	for _, g := range rep.Items {
		ev := "-"
		if len(g.Evidence) > 0 {
			ev = strings.Join(g.Evidence, "; ")
		}
		row := []string{g.Name, c.Status(g.Status.Word()), g.Message, dash(g.Command), ev}
		if context != "" {
			row = append([]string{context}, row...)
		}
		t.AddRow(row...)
		if g.Status != preflight.StatusPass && g.Command != "" {
			label := g.Name
			if context != "" {
				label = context + ": " + g.Name
			}
			cmds = append(cmds, "  # "+label+"\n  "+g.Command)
		}
	}
	if err := t.Print(w, opts); err != nil {
		return err
	}
	if opts.NoHeaders {
		return nil
	}
	if len(cmds) > 0 && !opts.Wide {
		fmt.Fprintln(w, "\nto look closer at the gates that did not pass (-o wide: every gate's command):")
		for _, c := range cmds {
			fmt.Fprintln(w, c)
		}
	}
	s := rep.Summary
	_, err := fmt.Fprintf(w, "\npre-flight to %s: %s; %d ok, %d warn, %d fail, %d unknown\n", rep.Target, s.Status.Word(), s.Pass, s.Warn, s.Fail, s.Unknown)
	return err
}
