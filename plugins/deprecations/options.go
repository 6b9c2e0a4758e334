package deprecations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

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
	f.StringVar(&o.TargetVersion, "target-version", o.TargetVersion, "Release to check against: v1.35, or +1 / +2 minors after the server. Default: the server's next minor. Required for files alone unless --ci.")
	f.StringSliceVarP(&o.Filenames, "filename", "f", o.Filenames, "Manifest files or directories (recursive) to scan; - reads stdin. Repeatable.")
	f.StringVarP(&o.Kustomize, "kustomize", "k", o.Kustomize, "Build the kustomization in this directory and scan the result.")
	f.StringSliceVar(&o.AuditLogs, "audit-log", o.AuditLogs, "Apiserver audit log files (JSON lines, plain or gzip; rotated files in any order); - reads stdin. Repeatable.")
	f.StringSliceVar(&o.RulesFiles, "rules", o.RulesFiles, "Extra lifecycle rules (this tool's `rules -o yaml` format or pluto's versions file) for third-party APIs. Repeatable.")
	f.BoolVar(&o.HelmHistory, "helm-history", o.HelmHistory, "Scan every kept Helm revision, not only the deployed one (a rollback to an old revision would fail too).")
	f.BoolVar(&o.CI, "ci", o.CI, "Repository mode: manifests only, target two minors after the built-in table's release unless --target-version is given, exit 1 on anything removed by then.")
	_ = cmd.RegisterFlagCompletionFunc("source", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var s []string
		for _, x := range dep.AllSources {
			s = append(s, string(x))
		}
		return s, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("target-version", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"+1", "+2"}, cobra.ShellCompDirectiveNoFileComp
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
	o.sources = map[dep.Source]bool{}
	for _, s := range o.Sources {
		for _, p := range strings.Split(s, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if !slices.Contains(dep.AllSources, dep.Source(p)) {
				return fmt.Errorf("unknown --source %q: want metrics, audit, objects, helm, manifests or crds", p)
			}
			o.sources[dep.Source(p)] = true
			o.explicit = true
		}
	}
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
			if len(o.AuditLogs) > 0 {
				o.sources[dep.SourceAudit] = true
			}
		default:
			for _, s := range []dep.Source{dep.SourceMetrics, dep.SourceObjects, dep.SourceHelm, dep.SourceCRDs} {
				o.sources[s] = true
			}
			if len(o.AuditLogs) > 0 {
				o.sources[dep.SourceAudit] = true
			}
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
	if _, _, err := parseTarget(o.TargetVersion); err != nil {
		return err
	}
	if o.manifestsOnly() && o.TargetVersion == "" && !o.CI {
		return errors.New("--target-version is required for files alone (for example --target-version v1.35, or +1 to ask the server)")
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

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// loadTable reads the built-in table and the rules files.
func loadTable(files []string) (*apilifecycle.Table, error) {
	tab := apilifecycle.Builtin()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading rules file: %w", err)
		}
		r, err := apilifecycle.ParseRules(b, f)
		if err != nil {
			return nil, err
		}
		tab = tab.With(r)
	}
	return tab, nil
}

func (o *Options) clusterSource() bool {
	return o.sources[dep.SourceMetrics] || o.sources[dep.SourceObjects] || o.sources[dep.SourceHelm] || o.sources[dep.SourceCRDs]
}

// needsCluster reports whether the run contacts the cluster: a cluster
// source, or a target relative to the server.
func (o *Options) needsCluster() bool {
	if o.clusterSource() {
		return true
	}
	if o.CI || (o.TargetVersion == "" && o.manifestsOnly()) {
		return false
	}
	abs, _, _ := parseTarget(o.TargetVersion)
	return abs.IsZero()
}

func (o *Options) manifestsOnly() bool {
	return len(o.sources) == 1 && o.sources[dep.SourceManifests]
}

// parseTarget reads --target-version: an absolute release, or +N (N minors
// after the server; "" means +1). It returns the absolute release (zero when
// relative) and, for +N, N in the relative result.
func parseTarget(s string) (apilifecycle.Release, bool, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return apilifecycle.Release{}, true, nil
	}
	if strings.HasPrefix(t, "+") {
		n, err := strconv.Atoi(t[1:])
		if err != nil || n < 0 || n > 20 {
			return apilifecycle.Release{}, true, fmt.Errorf("invalid --target-version %q: want +1, +2 or a release such as v1.35", s)
		}
		return apilifecycle.Release{}, true, nil
	}
	r, err := apilifecycle.ParseRelease(t)
	if err != nil {
		return r, false, fmt.Errorf("invalid --target-version %q: want +1, +2 or a release such as v1.35", s)
	}
	return r, false, nil
}

// relativeMinors returns N for +N ("" is +1).
func relativeMinors(s string) int {
	t := strings.TrimSpace(s)
	if t == "" {
		return 1
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(t, "+"))
	return n
}

// resolveTarget turns --target-version into a release, relative to base.
func (o *Options) resolveTarget(base apilifecycle.Release) (apilifecycle.Release, error) {
	abs, rel, err := parseTarget(o.TargetVersion)
	if err != nil {
		return abs, err
	}
	if !rel {
		return abs, nil
	}
	n := relativeMinors(o.TargetVersion)
	if o.CI && o.TargetVersion == "" {
		n = 2
	}
	if base.IsZero() {
		return base, fmt.Errorf("cannot tell the server's release to resolve --target-version %q", o.TargetVersion)
	}
	return base.Add(n), nil
}

// builtinRelease is the Kubernetes release of the built-in table (k8s.io/api v0.N -> 1.N).
func builtinRelease() apilifecycle.Release {
	s := apilifecycle.BuiltinSource()
	if i := strings.Index(s, "@v0."); i >= 0 {
		if r, err := apilifecycle.ParseRelease("1." + s[i+4:]); err == nil {
			return r
		}
	}
	return apilifecycle.Release{}
}

// Run reads the sources, classifies, prints the report and returns the exit error.
func (o *Options) Run(ctx context.Context) error {
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
		md     cli.Metadata
		target apilifecycle.Release
		err    error
		served *dep.Served
	)
	if o.needsCluster() {
		md, err = cli.Connect(ctx, cg)
		if err != nil {
			return nil, 0, err
		}
		sv, perr := apilifecycle.ParseRelease(md.ServerVersion)
		if perr != nil {
			return nil, 0, cli.ClusterErr(fmt.Errorf("cannot read the server version %q: %w", md.ServerVersion, perr))
		}
		if target, err = o.resolveTarget(sv); err != nil {
			return nil, 0, cli.UsageErr(err)
		}
		if dc, derr := cg.Discovery(); derr == nil {
			served, _ = dep.Discover(dc)
		}
	} else {
		// Files alone: no cluster, no context in the report.
		if target, err = o.resolveTarget(builtinRelease()); err != nil {
			return nil, 0, cli.UsageErr(err)
		}
	}
	rep := newReport(md, target)
	code := cli.ExitOK
	var raw []dep.Finding

	if o.sources[dep.SourceManifests] {
		fs, skipped, st, err := o.readManifests(ctx)
		raw = append(raw, fs...)
		rep.NotScanned = append(rep.NotScanned, skipped...)
		rep.addSource(st, err, &code)
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
	}
	if o.sources[dep.SourceAudit] {
		ar := &dep.AuditReader{}
		res, err := ar.Read(ctx, o.AuditLogs, o.In)
		raw = append(raw, res.Findings...)
		rep.NotScanned = append(rep.NotScanned, res.Skipped...)
		st := SourceStatus{Name: dep.SourceAudit, Scanned: fmt.Sprintf("%d lines, %d requests to deprecated APIs", res.Lines, res.Events)}
		if err != nil && !errors.Is(err, context.Canceled) {
			err = cli.UsageErr(fmt.Errorf("reading audit log: %w", err))
		}
		rep.addSource(st, err, &code)
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
	}
	if o.clusterSource() {
		fs, err := o.readCluster(ctx, cg, prefix, md, target, served, rep, &code)
		raw = append(raw, fs...)
		if err != nil {
			return nil, 0, err
		}
	}

	t := dep.Target{Release: target}
	if served != nil {
		t.Served = served.Serves
	}
	findings := dep.Classify(o.table, t, raw)
	rep.setItems(findings)
	return rep, code, nil
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

func (o *Options) readManifests(ctx context.Context) ([]dep.Finding, []dep.Skipped, SourceStatus, error) {
	m := &dep.ManifestSource{Scanner: &dep.ManifestScanner{Table: o.table}, Filenames: o.Filenames, Kustomize: o.Kustomize, Stdin: o.In}
	res, err := m.Read(ctx)
	var bad *dep.ErrBadInput
	if errors.As(err, &bad) {
		err = cli.UsageErr(bad)
	}
	return res.Findings, res.Skipped, SourceStatus{Name: dep.SourceManifests, Scanned: res.Scanned()}, err
}

// sourceResult is what one cluster source read.
type sourceResult struct {
	findings []dep.Finding
	skipped  []dep.Skipped
	status   SourceStatus
	err      error
	ran      bool
}

// readCluster reads the cluster sources concurrently: each is a few
// requests that the client retries on throttling or a busy server, so one
// at a time a struggling apiserver would cost a full retry cycle (or a full
// --request-timeout) per source. Results are added to the report in the
// fixed source order.
func (o *Options) readCluster(ctx context.Context, cg cli.ClientGetter, prefix string, md cli.Metadata, target apilifecycle.Release, served *dep.Served, rep *Report, code *int) ([]dep.Finding, error) {
	retry := o.retry(prefix)
	readers := []struct {
		src  dep.Source
		read func(context.Context) sourceResult
	}{
		{dep.SourceMetrics, func(ctx context.Context) sourceResult { return o.readMetrics(ctx, cg) }},
		{dep.SourceObjects, func(ctx context.Context) sourceResult { return o.readObjects(ctx, cg, retry, target, served) }},
		{dep.SourceHelm, func(ctx context.Context) sourceResult { return o.readHelm(ctx, cg, retry) }},
		{dep.SourceCRDs, func(ctx context.Context) sourceResult { return o.readCRDs(ctx, cg, retry) }},
	}
	results := make([]sourceResult, len(readers))
	var wg sync.WaitGroup
	for i, r := range readers {
		if !o.sources[r.src] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.read(ctx)
			results[i].ran = true
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var out []dep.Finding
	for _, res := range results {
		if !res.ran {
			continue
		}
		out = append(out, res.findings...)
		rep.NotScanned = append(rep.NotScanned, res.skipped...)
		rep.addSource(res.status, cli.ClassifyClusterErr(res.err, md, whatFailed[res.status.Name]), code)
	}
	return out, nil
}

// whatFailed names what each cluster source was doing, for its error.
var whatFailed = map[dep.Source]string{
	dep.SourceMetrics: "reading apiserver metrics",
	dep.SourceObjects: "reading objects",
	dep.SourceHelm:    "reading Helm releases",
	dep.SourceCRDs:    "reading CustomResourceDefinitions",
}

func (o *Options) readMetrics(ctx context.Context, cg cli.ClientGetter) sourceResult {
	res := sourceResult{status: SourceStatus{Name: dep.SourceMetrics, Note: dep.MetricNote}}
	srcs := metricsSources(ctx, cg)
	fs, skipped, err := dep.ScrapeMetrics(ctx, srcs)
	if len(srcs) > 1 {
		res.status.Note += fmt.Sprintf("; scraped %d instances", len(srcs))
	}
	res.skipped = skipped
	if err != nil {
		res.err = err
		return res
	}
	res.status.Scanned = fmt.Sprintf("%d series", len(fs))
	res.findings = fs
	return res
}

func (o *Options) readObjects(ctx context.Context, cg cli.ClientGetter, retry dep.Retry, target apilifecycle.Release, served *dep.Served) sourceResult {
	res := sourceResult{status: SourceStatus{Name: dep.SourceObjects}}
	dyn, err := cg.Dynamic()
	if err == nil && served == nil {
		err = errors.New("discovery failed")
	}
	if err != nil {
		res.err = err
		return res
	}
	r := &dep.ObjectsReader{Dynamic: dyn, Table: o.table, Served: served, Namespace: o.namespace, Retry: retry}
	or, err := r.Read(ctx, target)
	res.status.Scanned = fmt.Sprintf("%d objects of %d resources", or.Scanned, len(or.Resources))
	if or.StaleAnnotations > 0 {
		res.status.Note = fmt.Sprintf("%d last-applied annotations name a deprecated version that no field manager still writes (stale, not reported)", or.StaleAnnotations)
	}
	res.findings, res.err = or.Findings, err
	return res
}

func (o *Options) readHelm(ctx context.Context, cg cli.ClientGetter, retry dep.Retry) sourceResult {
	res := sourceResult{status: SourceStatus{Name: dep.SourceHelm}}
	kc, err := cg.Kube()
	if err != nil {
		res.err = err
		return res
	}
	h := &dep.HelmReader{Kube: kc, Scanner: &dep.ManifestScanner{Table: o.table}, Namespace: o.namespace, History: o.HelmHistory, Retry: retry}
	if _, real := kc.(*kubernetes.Clientset); real {
		if cfg, err := cg.ToRESTConfig(); err == nil {
			h.Metadata, _ = metadata.NewForConfig(cfg)
		}
	}
	hr, err := h.Read(ctx)
	res.findings, res.skipped, res.err = hr.Findings, hr.Skipped, err
	res.status.Scanned = fmt.Sprintf("%d releases, %d records", hr.Releases, hr.Records)
	return res
}

func (o *Options) readCRDs(ctx context.Context, cg cli.ClientGetter, retry dep.Retry) sourceResult {
	res := sourceResult{status: SourceStatus{Name: dep.SourceCRDs}}
	ec, err := cg.APIExtensions()
	if err != nil {
		res.err = err
		return res
	}
	fs, n, err := (&dep.CRDReader{Client: ec, Retry: retry}).Read(ctx)
	res.status.Scanned = fmt.Sprintf("%d CRDs", n)
	res.findings, res.err = fs, err
	return res
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

// metricsSources returns the apiservers to scrape. The metric is kept
// per instance, so where the kubernetes Service has several endpoints each
// is scraped on its own (with the TLS name "kubernetes", which apiserver
// serving certificates carry); otherwise the kubeconfig's server.
func metricsSources(ctx context.Context, cg cli.ClientGetter) []dep.MetricsSource {
	cfg, cerr := cg.ToRESTConfig()
	instance := "(kubeconfig server)"
	if cerr == nil && cfg.Host != "" {
		instance = cfg.Host
	}
	fetch := func(c *rest.Config) func(ctx context.Context) (io.ReadCloser, error) {
		return func(ctx context.Context) (io.ReadCloser, error) {
			var kc kubernetes.Interface
			var err error
			if c == nil {
				kc, err = cg.Kube()
			} else {
				kc, err = kubernetes.NewForConfig(c)
			}
			if err != nil {
				return nil, err
			}
			rc, ok := kc.Discovery().RESTClient().(*rest.RESTClient)
			if !ok || rc == nil {
				return nil, errors.New("no REST client for /metrics")
			}
			return rc.Get().AbsPath("/metrics").Stream(ctx)
		}
	}
	def := []dep.MetricsSource{{Instance: instance, Fetch: fetch(nil)}}
	if cerr != nil {
		return def
	}
	kc, err := cg.Kube()
	if err != nil {
		return def
	}
	slices, err := kc.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
	if err != nil {
		return def
	}
	var out []dep.MetricsSource
	for _, sl := range slices.Items {
		port := int32(443)
		for _, p := range sl.Ports {
			if p.Port != nil {
				port = *p.Port
			}
		}
		for _, ep := range sl.Endpoints {
			for _, addr := range ep.Addresses {
				c := rest.CopyConfig(cfg)
				c.Host = "https://" + net.JoinHostPort(addr, strconv.Itoa(int(port)))
				c.TLSClientConfig.ServerName = "kubernetes"
				out = append(out, dep.MetricsSource{Instance: c.Host, Fetch: fetch(c)})
			}
		}
	}
	if len(out) < 2 {
		return def
	}
	return out
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
	list := cli.ReportList{APIVersion: cli.APIVersion, Kind: "DeprecationsReportList", Items: []cli.ContextReport{}}
	t := o.findingsTable(true)
	codes := make([]int, 0, len(results))
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
					if len(rep.Items) == 0 {
						fmt.Fprintf(o.ErrOut, "%s: no deprecated or removed APIs found for %s.\n", r.Context, rep.TargetVersion)
					}
					o.printNotes(o.ErrOut, rep, r.Context+": ")
				}
			}
		}
		codes = append(codes, cr.ExitCode)
		list.Items = append(list.Items, cr)
	}
	if err := o.Print.PrintContexts(o.Out, list, t); err != nil {
		return err
	}
	return cli.ContextsOutcome(codes)
}
