package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
)

// StatusOptions holds the parsed state of `kubectl crd-migrate status`.
type StatusOptions struct {
	Print    *cli.PrintFlags
	FailOn   *cli.FailOnFlag
	Contexts *cli.ContextFlags
	// CheckpointNamespace is where checkpoints of earlier runs are looked up.
	CheckpointNamespace string
	// Names are the CRDs to show; empty means all.
	Names []string

	cg cli.ClientGetter
	genericiooptions.IOStreams
}

// NewStatusOptions returns StatusOptions with their defaults: --fail-on
// warning, so a CRD that needs a migration makes the command exit 1.
func NewStatusOptions(streams genericiooptions.IOStreams) *StatusOptions {
	f := cli.NewFailOnFlag()
	f.Value = "warning"
	return &StatusOptions{Print: cli.NewPrintFlags(), FailOn: f, Contexts: cli.NewContextFlags(), CheckpointNamespace: crdmigrate.DefaultCheckpointNamespace, IOStreams: streams}
}

// AddFlags registers the status flags on cmd.
func (o *StatusOptions) AddFlags(cmd *cobra.Command) {
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
	o.Contexts.AddFlags(cmd)
	cmd.Flags().StringVar(&o.CheckpointNamespace, "checkpoint-namespace", o.CheckpointNamespace, "Namespace of the ConfigMaps that hold the checkpoints of client-side runs.")
}

// Complete reads the CRD names and keeps the client getter.
func (o *StatusOptions) Complete(cg cli.ClientGetter, _ *cobra.Command, args []string) error {
	o.cg = cg
	o.Names = args
	cli.SetQuiet(cg, o.Print.Quiet)
	return nil
}

// Validate checks the flags without touching the network.
func (o *StatusOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.FailOn.Validate(); err != nil {
		return err
	}
	if err := o.Contexts.Validate(cli.ContextFlagSet(o.cg)); err != nil {
		return err
	}
	return validateNames(o.Names)
}

func validateNames(names []string) error {
	for _, n := range names {
		if !strings.Contains(n, ".") {
			return fmt.Errorf("%q is not a CustomResourceDefinition name: want <plural>.<group>, such as workloads.kueue.x-k8s.io", n)
		}
	}
	return nil
}

// Run prints the storage state of the CRDs, for one context or several.
func (o *StatusOptions) Run(ctx context.Context) error {
	if o.Contexts.Multi() {
		return o.runContexts(ctx)
	}
	rep, err := o.report(ctx, o.cg)
	if err != nil {
		return err
	}
	if err := o.print(rep); err != nil {
		return err
	}
	return cli.Findings(o.findings(rep))
}

// report inspects one cluster.
func (o *StatusOptions) report(ctx context.Context, cg cli.ClientGetter) (*StatusReport, error) {
	md, err := cli.Connect(ctx, cg)
	if err != nil {
		return nil, err
	}
	c, d, err := buildClients(cg, limits{})
	if err != nil {
		return nil, cli.ClassifyClusterErr(err, md, "building clients")
	}
	items, svm, err := crdmigrate.StatusOf(ctx, c, d, &crdmigrate.CheckpointStore{Client: c.Kube, Namespace: o.CheckpointNamespace}, o.Names)
	if err != nil {
		return nil, crdErr(err, md, "reading the storage state of CRDs")
	}
	return newStatusReport(md, items, svm), nil
}

func (o *StatusOptions) findings(rep *StatusReport) int {
	var sev []cli.Severity
	for _, it := range rep.Items {
		sev = append(sev, severity(it.Verdict))
	}
	return o.FailOn.Count(sev...)
}

// runContexts reports several contexts together; one failing context does
// not stop the others, and the exit code is the worst of them.
func (o *StatusOptions) runContexts(ctx context.Context) error {
	names, err := o.Contexts.Resolve(o.cg)
	if err != nil {
		return err
	}
	results := cli.FanOutReachable(ctx, o.cg, names, o.Contexts.Parallel, func(ctx context.Context, name string) (*StatusReport, error) {
		return o.report(ctx, o.cg.ForContext(name))
	})
	list := cli.ReportList{APIVersion: cli.ReportAPIVersion("CRDStatusReportList"), Kind: "CRDStatusReportList", Items: []cli.ContextReport{}}
	var codes []int
	var summary []string
	c := o.Print.Colorizer(o.Out)
	t := statusTable(nil, c)
	t.Columns = append([]cli.Column{{Name: "CONTEXT"}}, t.Columns...)
	for _, r := range results {
		cr, ok := cli.ContextEntry(r, o.ErrOut, o.Print.Quiet)
		if ok {
			cr.Report = r.Value
			if o.findings(r.Value) > 0 {
				cr.ExitCode = cli.ExitFindings
			}
			row := statusTable(r.Value.Items, c)
			for _, cells := range row.Rows {
				t.AddRow(append([]string{r.Context}, cells...)...)
			}
			summary = append(summary, r.Context+": "+r.Value.summaryLine())
		}
		codes = append(codes, cr.ExitCode)
		list.Items = append(list.Items, cr)
	}
	if err := o.Print.PrintContexts(o.Out, list, *t); err != nil {
		return err
	}
	if err := o.Print.PrintSummary(o.Out, len(t.Rows) > 0, summary...); err != nil {
		return err
	}
	return cli.ContextsOutcome(codes)
}

func (o *StatusOptions) print(rep *StatusReport) error {
	switch {
	case o.Print.Quiet:
		return nil
	case o.Print.Structured():
		return cli.PrintStructured(o.Out, o.Print.Output, rep)
	}
	if len(rep.Items) > 0 {
		if err := statusTable(rep.Items, o.Print.Colorizer(o.Out)).Print(o.Out, o.Print.TableOptions()); err != nil {
			return err
		}
	}
	return o.Print.PrintSummary(o.Out, len(rep.Items) > 0, rep.summaryLine())
}

func severity(v crdmigrate.Verdict) cli.Severity {
	switch v {
	case crdmigrate.VerdictBlocked:
		return cli.SeverityBlocking
	case crdmigrate.VerdictMigrationNeeded:
		return cli.SeverityWarning
	}
	return cli.SeverityNone
}

// crdErr maps errors from reading CRDs: a missing CRD is exit 3 with a hint.
func crdErr(err error, md cli.Metadata, what string) error {
	var nf *crdmigrate.NotFoundError
	if errors.As(err, &nf) {
		return cli.WithHint(cli.ClusterErr(err), "kubectl get customresourcedefinitions")
	}
	return cli.ClassifyClusterErr(err, md, what)
}

// RunOptions holds the parsed state of `kubectl crd-migrate run`.
type RunOptions struct {
	Print *cli.PrintFlags
	// All migrates every CRD whose storedVersions lists an old version.
	All bool
	// DryRun counts and estimates; it changes nothing.
	DryRun cli.DryRunFlag
	// Method is auto, client or in-tree.
	Method  string
	QPS     float32
	Burst   int
	Workers int
	Retries int
	// Force rewrites even when storedVersions is already trimmed.
	Force               bool
	CheckpointNamespace string
	// InTreeTimeout bounds the wait for the in-tree controller to pick a
	// migration up.
	InTreeTimeout time.Duration
	// Timeout stops the run after this long, resumable (0: no limit).
	Timeout time.Duration
	Names   []string

	cg cli.ClientGetter
	genericiooptions.IOStreams
}

// NewRunOptions returns RunOptions with their defaults.
func NewRunOptions(streams genericiooptions.IOStreams) *RunOptions {
	return &RunOptions{
		Print:               cli.NewPrintFlags(),
		Method:              crdmigrate.MethodAuto,
		QPS:                 50,
		Workers:             8,
		Retries:             8,
		CheckpointNamespace: crdmigrate.DefaultCheckpointNamespace,
		InTreeTimeout:       30 * time.Second,
		IOStreams:           streams,
	}
}

// AddFlags registers the run flags on cmd.
func (o *RunOptions) AddFlags(cmd *cobra.Command) {
	o.Print.AddFlags(cmd)
	f := cmd.Flags()
	f.BoolVar(&o.All, "all", o.All, "Migrate every CRD whose status.storedVersions lists a version other than its storage version.")
	o.DryRun = cli.DryRunFlag{
		Client: "count the objects, check the webhooks the writes go through and estimate the time at --qps, reading only",
		Server: "the same, and send one object back as a server-side dry-run update (dryRun=All) through conversion and admission",
	}
	o.DryRun.AddFlags(cmd)
	f.StringVar(&o.Method, "method", o.Method, "How to rewrite: auto (in-tree when served and its controller runs, else client), client or in-tree.")
	f.Float32Var(&o.QPS, "qps", o.QPS, "Client-side loop: most requests per second to the apiserver.")
	f.IntVar(&o.Burst, "burst", o.Burst, "Client-side loop: requests allowed above --qps in a burst (0: the same as --qps).")
	f.IntVar(&o.Workers, "workers", o.Workers, "Client-side loop: concurrent writes.")
	f.IntVar(&o.Retries, "retries", o.Retries, "Retries of a request that failed with a transient error (throttling, 5xx, connection refused), with backoff honouring Retry-After.")
	f.BoolVar(&o.Force, "force", o.Force, "Rewrite every object even when storedVersions lists only the storage version (for example after rotating encryption keys). Break-glass: recorded on each CRD with who and when (annotation "+crdmigrate.AnnotationBreakGlass+").")
	f.StringVar(&o.CheckpointNamespace, "checkpoint-namespace", o.CheckpointNamespace, "Namespace of the ConfigMap crd-migrate.<crd> that holds the checkpoint of a client-side run. Whoever can write it can make a resumed run skip objects, so keep it admin-only.")
	f.DurationVar(&o.InTreeTimeout, "in-tree-timeout", o.InTreeTimeout, "How long the in-tree controller may take to pick a StorageVersionMigration up before it counts as not running.")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "Stop after this long, leaving a checkpoint the same command resumes from (exit 4); 0 runs to the end. An in-tree migration keeps running in the cluster; run again to keep watching it.")
	_ = cmd.RegisterFlagCompletionFunc("method", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{crdmigrate.MethodAuto, crdmigrate.MethodClient, crdmigrate.MethodInTree}, cobra.ShellCompDirectiveNoFileComp
	})
}

// Complete reads the CRD names and keeps the client getter.
func (o *RunOptions) Complete(cg cli.ClientGetter, _ *cobra.Command, args []string) error {
	o.cg = cg
	o.Names = args
	cli.SetQuiet(cg, o.Print.Quiet)
	if o.Burst == 0 {
		o.Burst = max(1, int(o.QPS+0.999))
	}
	return nil
}

// Validate checks the flags without touching the network.
func (o *RunOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.DryRun.Validate(); err != nil {
		return err
	}
	switch {
	case o.All && len(o.Names) > 0:
		return errors.New("name CRDs or give --all, not both")
	case !o.All && len(o.Names) == 0:
		return errors.New("name at least one CRD, or give --all")
	}
	switch o.Method {
	case crdmigrate.MethodAuto, crdmigrate.MethodClient, crdmigrate.MethodInTree:
	default:
		return fmt.Errorf("unknown --method %q: want auto, client or in-tree", o.Method)
	}
	if o.QPS <= 0 {
		return fmt.Errorf("--qps must be positive, not %v", o.QPS)
	}
	if o.Burst < 0 {
		return fmt.Errorf("--burst must not be negative, not %d", o.Burst)
	}
	if o.Workers < 1 || o.Workers > 256 {
		return fmt.Errorf("--workers must be between 1 and 256, not %d", o.Workers)
	}
	if o.Retries < 0 {
		return fmt.Errorf("--retries must not be negative, not %d", o.Retries)
	}
	if o.Timeout < 0 {
		return fmt.Errorf("--timeout must not be negative, not %s", o.Timeout)
	}
	if o.InTreeTimeout <= 0 {
		return fmt.Errorf("--in-tree-timeout must be positive, not %s", o.InTreeTimeout)
	}
	if o.CheckpointNamespace == "" {
		return errors.New("--checkpoint-namespace must not be empty")
	}
	return validateNames(o.Names)
}

func (o *RunOptions) retry() crdmigrate.Retry {
	if o.Retries == 0 {
		return crdmigrate.Retry{Attempts: -1}
	}
	return crdmigrate.Retry{Attempts: o.Retries}
}

// Run migrates the CRDs one after the other, or plans it with --dry-run.
func (o *RunOptions) Run(ctx context.Context) error {
	md, err := cli.Connect(ctx, o.cg)
	if err != nil {
		return err
	}
	c, d, err := buildClients(o.cg, limits{qps: o.QPS, burst: o.Burst})
	if err != nil {
		return cli.ClassifyClusterErr(err, md, "building clients")
	}
	prog := newProgressPrinter(o.ErrOut, cli.IsTerminal(o.ErrOut), o.Print.Quiet)
	defer prog.done()
	r := &crdmigrate.Run{
		Clients: c, Discovery: d, Checkpoints: &crdmigrate.CheckpointStore{Client: c.Kube, Namespace: o.CheckpointNamespace},
		Names: o.Names, All: o.All, Method: o.Method, Force: o.Force, Workers: o.Workers, Retry: o.retry(),
		InTreeTimeout: o.InTreeTimeout, OnStart: prog.start, OnEvent: prog.event, OnProgress: prog.progress,
	}
	p, step, err := r.Prepare(ctx)
	switch {
	case errors.Is(err, crdmigrate.ErrInTreeNotServed):
		return cli.WithHint(cli.ClusterErr(fmt.Errorf("--method in-tree: %w", err)), "kubectl crd-migrate run --method client ...")
	case err != nil && step == crdmigrate.StepCRDs:
		return crdErr(err, md, string(step))
	case err != nil:
		return cli.ClassifyClusterErr(err, md, string(step))
	}
	if o.DryRun.Enabled() {
		return o.plan(ctx, md, r, p)
	}
	if len(p.CRDs) == 0 {
		return o.printRun(newRunReport(md, nil))
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if o.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, o.Timeout)
	}
	defer cancel()
	var items []RunItem
	for _, oc := range r.Migrate(runCtx, p) {
		if item := itemFor(oc.Result, oc.Err); item != nil {
			items = append(items, *item)
		}
		if oc.Err != nil {
			prog.done()
			// The CRDs done before this one; none done is no table ("No
			// CustomResourceDefinition needs a migration" would say the
			// opposite of the error below it), but a script still gets
			// its report.
			if len(items) > 0 || o.Print.Structured() {
				_ = o.printRun(newRunReport(md, items))
			}
			err := oc.Err
			if runCtx.Err() != nil && ctx.Err() == nil {
				err = &crdmigrate.StoppedError{CRD: oc.CRD, Err: fmt.Errorf("stopped after --timeout %s: %w", o.Timeout, oc.Err)}
			}
			return o.mapRunErr(err, oc.CRD, md)
		}
	}
	prog.done()
	return o.printRun(newRunReport(md, items))
}

// mapRunErr gives each failure its exit code and hint.
func (o *RunOptions) mapRunErr(err error, crd string, md cli.Metadata) error {
	rerun := "kubectl crd-migrate run " + crd
	if md.Context != "" {
		rerun += " --context " + md.Context
	}
	var (
		pre     *crdmigrate.PreflightError
		obj     *crdmigrate.ObjectError
		stopped *crdmigrate.StoppedError
		changed *crdmigrate.CRDChangedError
		failed  *crdmigrate.InTreeFailedError
		svErr   *crdmigrate.StoredVersionsError
	)
	switch {
	case apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "admission webhook"):
		// Exit 3 outranks 4: the checkpoint is kept, but rerunning does
		// not help until the permission is granted.
		return cli.WithHint(cli.ClusterErr(err), rerun+"   # resumes once the permission is granted")
	case errors.As(err, &pre):
		// A run its pre-flight check refuses is blocked, as the dry run
		// reports it and as pre-flight gates report a FAIL: exit 1.
		hint := pre.Hint
		if hint == "" {
			hint = "kubectl crd-migrate status " + crd
		}
		return &cli.ExitError{Code: cli.ExitFindings, Err: err, Hint: hint}
	case errors.As(err, &obj):
		if apierrors.IsForbidden(obj.Err) && !strings.Contains(obj.Err.Error(), "admission webhook") {
			return cli.WithHint(cli.ClusterErr(err), fmt.Sprintf("kubectl auth can-i update %s", obj.Resource))
		}
		return cli.WithHint(cli.Incomplete(err), rerun+"   # resumes from the checkpoint once the cause is fixed")
	case errors.As(err, &stopped), errors.As(err, &changed), errors.Is(err, crdmigrate.ErrConcurrentRun):
		return cli.WithHint(cli.Incomplete(err), rerun+"   # resumes")
	case errors.As(err, &failed):
		return cli.WithHint(cli.Incomplete(err), "kubectl get storageversionmigrations "+failed.Migration+" -o yaml")
	case errors.As(err, &svErr):
		return cli.ClusterErr(err)
	case errors.Is(err, crdmigrate.ErrNoController):
		return cli.WithHint(cli.ClusterErr(err), rerun+" --method client")
	}
	return cli.ClassifyClusterErr(err, md, "migrating "+crd)
}

// plan runs the pre-flight checks and estimates each CRD's migration.
func (o *RunOptions) plan(ctx context.Context, md cli.Metadata, r *crdmigrate.Run, p *crdmigrate.Prepared) error {
	items, sum, err := r.DryRun(ctx, p, o.DryRun.Strategy() == cli.DryRunServer, o.QPS, o.Burst)
	if err != nil {
		return cli.ClassifyClusterErr(err, md, "dry run")
	}
	rep := &PlanReport{Header: cli.NewHeader("CRDMigrationPlan", md), Items: items, Summary: sum}
	if err := o.printPlan(rep); err != nil {
		return err
	}
	return cli.Findings(sum.Blocked)
}
