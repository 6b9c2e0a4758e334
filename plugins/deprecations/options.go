package deprecations

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

// gcPercent is the GC target Run sets unless GOGC is set. The heap of a
// scan is small and short-lived (about 5 MB live on the corpus x10, most
// of the process's peak RSS being the binary), so Go's default of 100
// let the heap reach twice that before collecting: at 50 the peak RSS
// of a scan of the corpus x10 was about 4 MB lower (41 against 45 MB
// median, 43 against 48 MB at most, 9 alternating runs, busy machine),
// its CPU time unchanged within the noise.
const gcPercent = 50

// Options holds the parsed state of `kubectl deprecations`.
type Options struct {
	Print  *cli.PrintFlags
	FailOn *cli.FailOnFlag

	Sources       []string
	TargetVersion string
	Filenames     []string
	Kustomize     string
	AuditLogs     []string
	RulesFiles    []string
	HelmHistory   bool
	CI            bool
	// Contexts reads the cluster sources of several kubeconfig contexts.
	Contexts *cli.ContextFlags

	cg        cli.ClientGetter
	namespace string
	sources   map[dep.Source]bool
	explicit  bool
	target    dep.TargetSpec
	table     *apilifecycle.Table
	errMu     sync.Mutex
	genericiooptions.IOStreams
}

// NewOptions returns Options with their defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{Print: cli.NewPrintFlags(), FailOn: cli.NewFailOnFlag(), Contexts: cli.NewContextFlags(), IOStreams: streams}
}

// AddFlags registers the command's flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&o.Sources, "source", o.Sources, "Sources to read, comma separated: metrics, audit, objects, helm, manifests, crds. Default: the cluster sources (metrics, objects, helm, crds), audit with --audit-log, and only manifests when -f or -k is given.")
	cli.AddTargetFlag(cmd, &o.TargetVersion, fmt.Sprintf("Release to check against: v1.35, or +1 / +2 minors after the server; at most v%s, %s after the lifecycle data's release. Default: the server's next minor. Required for files alone unless --ci. (--target-version is an alias.)", dep.BuiltinRelease().Add(dep.KnownAhead), cli.Plural(dep.KnownAhead, "minor")), []string{"+1", "+2"})
	f.StringSliceVarP(&o.Filenames, "filename", "f", o.Filenames, "Manifest files or directories (recursive) to scan; - reads stdin. Repeatable.")
	f.StringVarP(&o.Kustomize, "kustomize", "k", o.Kustomize, "Build the kustomization in this directory and scan the result.")
	f.StringSliceVar(&o.AuditLogs, "audit-log", o.AuditLogs, "Apiserver audit log files (JSON lines, plain or gzip; rotated files in any order); - reads stdin. Repeatable.")
	f.StringSliceVar(&o.RulesFiles, "rules", o.RulesFiles, "Extra lifecycle rules (this tool's format, as \"kubectl deprecations rules -o yaml\" prints it, or pluto's versions file) for third-party APIs. Repeatable.")
	for _, name := range []string{"filename", "audit-log", "rules"} {
		_ = cmd.MarkFlagFilename(name)
	}
	f.BoolVar(&o.HelmHistory, "helm-history", o.HelmHistory, "Scan every kept Helm revision, not only the deployed one (a rollback to an old revision would fail too).")
	f.BoolVar(&o.CI, "ci", o.CI, "Repository mode: manifests only, target two minors after the built-in table's release unless --target is given, exit 1 on anything removed by then.")
	_ = cmd.RegisterFlagCompletionFunc("source", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var s []string
		for _, x := range dep.AllSources {
			s = append(s, string(x))
		}
		return s, cobra.ShellCompDirectiveNoFileComp
	})
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
	o.Contexts.AddFlags(cmd)
}

// Complete fills in the client getter and namespace.
func (o *Options) Complete(cg cli.ClientGetter, _ *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	if ns, explicit, err := cg.Namespace(); err == nil && explicit {
		o.namespace = ns
	}
	return nil
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
	var err error
	if o.sources, err = dep.ParseSources(o.Sources); err != nil {
		return err
	}
	o.explicit = len(o.sources) > 0
	files := len(o.Filenames) > 0 || o.Kustomize != ""
	if o.CI {
		if !files {
			return errors.New("--ci scans manifests: give -f or -k")
		}
		if o.explicit && (len(o.sources) != 1 || !o.sources[dep.SourceManifests]) {
			return errors.New("--ci reads manifests only; drop --source")
		}
	}
	if !o.explicit {
		switch {
		case files || o.CI:
			o.sources[dep.SourceManifests] = true
		default:
			for _, s := range dep.ClusterSources {
				o.sources[s] = true
			}
		}
		if len(o.AuditLogs) > 0 {
			o.sources[dep.SourceAudit] = true
		}
	}
	if o.sources[dep.SourceManifests] && !files {
		return errors.New("--source manifests needs -f or -k")
	}
	if o.sources[dep.SourceAudit] && len(o.AuditLogs) == 0 {
		return errors.New("--source audit needs --audit-log")
	}
	if n := count(o.Filenames, "-") + count(o.AuditLogs, "-"); n > 1 {
		return errors.New("stdin (-) can be read only once")
	}
	if o.target, err = dep.ParseTarget(o.TargetVersion); err != nil {
		return err
	}
	if o.CI && o.TargetVersion == "" {
		o.target.Minors = 2
	}
	if o.manifestsOnly() && o.TargetVersion == "" && !o.CI {
		return errors.New("--target is required for files alone (for example --target v1.35, or +1 to ask the server)")
	}
	if o.Contexts.Multi() && (o.sources[dep.SourceManifests] || o.sources[dep.SourceAudit] || o.CI) {
		return errors.New("--contexts and --all-contexts read the cluster sources of each context; scan files and audit logs in a run of their own")
	}
	tab, err := loadTable(o.RulesFiles)
	if err != nil {
		return err
	}
	o.table = tab
	return nil
}

// loadTable is dep.LoadTable with a --rules file that cannot be read or
// parsed refused as input (exit 3).
func loadTable(files []string) (*apilifecycle.Table, error) {
	tab, err := dep.LoadTable(files)
	var bad *dep.ErrBadInput
	if errors.As(err, &bad) {
		return nil, cli.InputErr(bad)
	}
	return tab, err
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// needsCluster reports whether the run contacts the cluster: a cluster
// source, or a target relative to the server.
func (o *Options) needsCluster() bool {
	if dep.NeedsCluster(o.sources) {
		return true
	}
	if o.CI || (o.TargetVersion == "" && o.manifestsOnly()) {
		return false
	}
	return o.target.Relative()
}

func (o *Options) manifestsOnly() bool {
	return len(o.sources) == 1 && o.sources[dep.SourceManifests]
}

// Run reads the sources, classifies, prints the report and returns the exit error.
func (o *Options) Run(ctx context.Context) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if o.Contexts.Multi() {
		return o.runContexts(ctx)
	}
	rep, code, err := o.check(ctx, o.cg, "")
	if err != nil {
		return err
	}
	if err := o.print(rep); err != nil {
		return err
	}
	return o.outcome(rep, code)
}

// check reads the sources of one cluster (cg) and the files, and returns
// the report and the exit code of the sources that failed; prefix goes
// before the retry warnings on stderr.
func (o *Options) check(ctx context.Context, cg cli.ClientGetter, prefix string) (*Report, int, error) {
	var (
		md      cli.Metadata
		target  apilifecycle.Release
		err     error
		cluster *dep.Cluster
	)
	// Local input first: a missing file is refused before the cluster is
	// asked anything.
	if err := dep.CheckInputs(o.Filenames, o.Kustomize, o.AuditLogs); err != nil {
		return nil, 0, cli.InputErr(err)
	}
	if o.needsCluster() {
		md, err = cli.Connect(ctx, cg)
		if err != nil {
			return nil, 0, err
		}
		sv, perr := apilifecycle.ParseRelease(md.ServerVersion)
		if perr != nil {
			return nil, 0, cli.ClusterErr(fmt.Errorf("cannot read the server version %q: %w", md.ServerVersion, perr))
		}
		if target, err = o.target.Resolve(sv); err != nil {
			return nil, 0, cli.UsageErr(err)
		}
		cluster = clusterClients(cg)
	} else if target, err = o.target.Resolve(dep.BuiltinRelease()); err != nil {
		// Files alone: no cluster, no context in the report.
		return nil, 0, cli.UsageErr(err)
	}
	if err := checkTarget(target, "kubectl deprecations"); err != nil {
		return nil, 0, err
	}
	k := &dep.Check{
		Table: o.table, Sources: o.sources, Target: target,
		Filenames: o.Filenames, Kustomize: o.Kustomize, Stdin: o.In, AuditLogs: o.AuditLogs,
		HelmHistory: o.HelmHistory, Namespace: o.namespace, Retry: o.retry(prefix),
	}
	res, err := k.Run(ctx, cluster)
	var bad *dep.ErrBadInput
	if errors.As(err, &bad) {
		return nil, 0, cli.InputErr(bad)
	}
	if err != nil {
		return nil, 0, err
	}
	rep := newReport(md, target)
	code := cli.ExitOK
	for _, st := range res.Sources {
		rep.addSource(st, sourceErr(st, md), &code)
	}
	rep.NotScanned = res.NotScanned
	rep.setItems(res.Findings)
	if rep.Summary.NotScanned > 0 {
		// An input that was not read at all leaves the answer incomplete:
		// it is listed, counted and, with exit 3, never passes as clean.
		code = cli.Worst(code, cli.ExitUnavailable)
	}
	return rep, code, nil
}

// sourceErr gives a source's error its exit code: local input that could
// not be read is exit 3 (Run refuses it before a report is made), a
// cluster source's failure is classified as the cluster's.
func sourceErr(st dep.SourceStatus, md cli.Metadata) error {
	if st.Err == nil {
		return nil
	}
	var bad *dep.ErrBadInput
	if errors.As(st.Err, &bad) {
		return cli.InputErr(bad)
	}
	if st.Name == dep.SourceManifests || st.Name == dep.SourceAudit {
		return st.Err
	}
	return cli.ClassifyClusterErr(st.Err, md, whatFailed[st.Name])
}

// clusterClients builds the clients of one context for the cluster
// sources; a client that cannot be built fails only the sources that use
// it.
func clusterClients(cg cli.ClientGetter) *dep.Cluster {
	c := &dep.Cluster{}
	c.Kube, c.KubeErr = cg.Kube()
	c.Dynamic, c.DynamicErr = cg.Dynamic()
	c.Ext, c.ExtErr = cg.APIExtensions()
	if dc, err := cg.Discovery(); err == nil {
		c.Served, _ = dep.Discover(dc)
	}
	cfg, cerr := cg.ToRESTConfig()
	if _, real := c.Kube.(*kubernetes.Clientset); real && cerr == nil {
		c.Metadata, _ = metadata.NewForConfig(cfg)
	} else {
		cfg = nil
	}
	c.FindMetrics = func(ctx context.Context) []dep.MetricsSource { return dep.MetricsSources(ctx, c.Kube, c.KubeErr, cfg) }
	return c
}

// outcome is the exit of one report: findings at or above --fail-on, else
// the code of the sources that could not be read.
func (o *Options) outcome(rep *Report, code int) error {
	sev := make([]cli.Severity, 0, len(rep.Items))
	for _, it := range rep.Items {
		sev = append(sev, it.Severity)
	}
	if n := o.FailOn.Count(sev...); n > 0 {
		code = cli.Worst(code, cli.ExitFindings)
		if code == cli.ExitFindings {
			return cli.Findings(n)
		}
	}
	if code != cli.ExitOK {
		return &cli.ExitError{Code: code, Err: fmt.Errorf("some sources could not be read: %s", rep.failed())}
	}
	return nil
}

// whatFailed names what each cluster source was doing, for its error.
var whatFailed = map[dep.Source]string{
	dep.SourceMetrics: "reading apiserver metrics",
	dep.SourceObjects: "reading objects",
	dep.SourceHelm:    "reading Helm releases",
	dep.SourceCRDs:    "reading CustomResourceDefinitions",
}

// retry is the retry policy of the cluster sources' paged lists: a
// refused or broken connection (no answer at all) is retried with backoff
// for up to dep.DefaultRetryBudget per page, while throttling and 5xx are
// left to client-go's Retry-After handling; each retry is said on
// stderr (the sources run concurrently, so one line at a time), after
// prefix (the context, when several are read).
func (o *Options) retry(prefix string) dep.Retry {
	return dep.Retry{OnRetry: func(what string, attempt int, wait time.Duration, err error) {
		if o.Print.Quiet {
			return
		}
		o.errMu.Lock()
		defer o.errMu.Unlock()
		if wait == 0 {
			fmt.Fprintf(o.ErrOut, "%swarning: %s: %v\n", prefix, what, err)
			return
		}
		fmt.Fprintf(o.ErrOut, "%swarning: %s failed, retry %d in %s: %v\n", prefix, what, attempt, wait.Round(time.Millisecond), err)
	}}
}

// runContexts reads the cluster sources of several contexts at once and
// reports them together, each against its own target (by default the
// next minor of its own server); one failing context does not stop the
// others, and the exit code is the worst of them.
func (o *Options) runContexts(ctx context.Context) error {
	names, err := o.Contexts.Resolve(o.cg)
	if err != nil {
		return err
	}
	type checked struct {
		rep  *Report
		code int
	}
	results := cli.FanOutReachable(ctx, o.cg, names, o.Contexts.Parallel, func(ctx context.Context, name string) (checked, error) {
		rep, code, err := o.check(ctx, o.cg.ForContext(name), name+": ")
		return checked{rep, code}, err
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	list := cli.ReportList{APIVersion: cli.ReportAPIVersion("DeprecationsReportList"), Kind: "DeprecationsReportList", Items: []cli.ContextReport{}}
	t := o.findingsTable(true)
	codes := make([]int, 0, len(results))
	var summary []string
	for _, r := range results {
		cr, ok := cli.ContextEntry(r, o.ErrOut, o.Print.Quiet)
		if ok {
			rep := r.Value.rep
			cr.Report = rep
			cr.ExitCode = cli.ExitCode(o.outcome(rep, r.Value.code))
			o.addRows(&t, rep, r.Context)
			if !o.Print.Quiet {
				if f := rep.failed(); f != "" {
					fmt.Fprintf(o.ErrOut, "%s: some sources could not be read: %s\n", r.Context, f)
				}
				if !o.Print.Structured() {
					o.printNotes(o.ErrOut, rep, r.Context+": ")
				}
				summary = append(summary, rep.summaryLine(r.Context+": "))
			}
		}
		codes = append(codes, cr.ExitCode)
		list.Items = append(list.Items, cr)
	}
	if err := o.Print.PrintContexts(o.Out, list, t); err != nil {
		return err
	}
	if err := o.Print.PrintSummary(o.Out, len(t.Rows) > 0, summary...); err != nil {
		return err
	}
	return cli.ContextsOutcome(codes)
}

// checkTarget refuses a target the lifecycle data cannot judge (exit 2),
// with the command that works as the hint.
func checkTarget(target apilifecycle.Release, command string) error {
	newest, err := dep.CheckTarget(target, dep.BuiltinRelease())
	if err != nil {
		return cli.WithHint(cli.UsageErr(err), fmt.Sprintf("%s --target v%s (the newest the lifecycle data can judge)", command, newest))
	}
	return nil
}
