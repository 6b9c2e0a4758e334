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

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Check is one run of `kubectl deprecations`: which sources to read, the
// lifecycle table and the release the findings are judged against. Run
// reads every source and classifies what they found; a cluster source that
// could not be read is reported in its SourceStatus and the others still
// run, while a local input that could not be read (*ErrBadInput) refuses
// the run before the cluster is read.
type Check struct {
	// Table is the lifecycle table (built in, plus --rules).
	Table *apilifecycle.Table
	// Sources are the sources to read.
	Sources map[Source]bool
	// Target is the release findings are judged against.
	Target apilifecycle.Release

	// Filenames, Kustomize and Stdin are the manifests source's input.
	Filenames []string
	Kustomize string
	Stdin     io.Reader
	// AuditLogs are the audit log files ("-" is Stdin).
	AuditLogs []string
	// HelmHistory scans every kept Helm revision.
	HelmHistory bool
	// Namespace limits the objects and Helm sources ("" for all).
	Namespace string
	// Retry is the retry policy of the cluster sources' paged lists.
	Retry Retry
}

// Cluster holds the clients of the one cluster whose sources a Check reads.
// A client that could not be built is nil, with its error in the matching
// Err field: only the sources that need it fail.
type Cluster struct {
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Ext      apiextclient.Interface
	Metadata metadata.Interface
	// Served is what the server serves (nil when discovery failed).
	Served *Served
	// Metrics are the apiserver instances to scrape.
	Metrics []MetricsSource
	// FindMetrics, when set, finds the instances in place of Metrics, as
	// part of the metrics source: the list it makes retries while a
	// throttled server asks it to, and run before the sources it would hold
	// every other source back by that long.
	FindMetrics func(ctx context.Context) []MetricsSource

	KubeErr, DynamicErr, ExtErr error
}

// SourceStatus says what one source read, or why it could not.
type SourceStatus struct {
	Name    Source `json:"name"`
	Scanned string `json:"scanned,omitempty"`
	Note    string `json:"note,omitempty"`
	Error   string `json:"error,omitempty"`
	// Err is the error behind Error, for the caller's exit code.
	Err error `json:"-"`
}

// CheckResult is what a Check found: the classified findings, the input it
// could not scan, and one status per source in a fixed order.
type CheckResult struct {
	Findings   []Finding
	NotScanned []Skipped
	Sources    []SourceStatus
}

// ClusterSources are the sources read from a cluster.
var ClusterSources = []Source{SourceMetrics, SourceObjects, SourceHelm, SourceCRDs}

// NeedsCluster reports whether any of the sources reads the cluster.
func NeedsCluster(sources map[Source]bool) bool {
	for _, s := range ClusterSources {
		if sources[s] {
			return true
		}
	}
	return false
}

// Run reads the manifests and audit logs, then the cluster sources of c
// (nil when no cluster source is asked for), and classifies the findings.
// It returns an error only when ctx ends or a local input is refused
// (*ErrBadInput: a path that does not exist, a file, directory, stream or
// kustomization with no object, an audit log with no event).
func (k *Check) Run(ctx context.Context, c *Cluster) (CheckResult, error) {
	var res CheckResult
	var raw []Finding
	if k.Sources[SourceManifests] {
		m := &ManifestSource{Scanner: &ManifestScanner{Table: k.Table}, Filenames: k.Filenames, Kustomize: k.Kustomize, Stdin: k.Stdin}
		mr, err := m.Read(ctx)
		// The first source's slices are taken as they are: a copy of
		// the findings of thousands of files was a megabyte more on the
		// heap while they are classified.
		raw, res.NotScanned = mr.Findings, mr.Skipped
		res.add(SourceStatus{Name: SourceManifests, Scanned: mr.Scanned()}, err)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if err != nil {
			return res, err
		}
	}
	if k.Sources[SourceAudit] {
		ar, err := (&AuditReader{}).Read(ctx, k.AuditLogs, k.Stdin)
		raw = append(raw, ar.Findings...)
		res.NotScanned = append(res.NotScanned, ar.Skipped...)
		res.add(SourceStatus{Name: SourceAudit, Scanned: cli.Plural(int(ar.Lines), "line") + ", " + cli.Plural(int(ar.Events), "request") + " to deprecated APIs"}, err)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if err != nil {
			return res, err
		}
	}
	if c != nil && NeedsCluster(k.Sources) {
		fs, err := k.readCluster(ctx, c, &res)
		if err != nil {
			return res, err
		}
		raw = append(raw, fs...)
	}
	t := Target{Release: k.Target}
	if c != nil && c.Served != nil {
		t.Served = c.Served.Serves
	}
	res.Findings = Classify(k.Table, t, raw)
	return res, nil
}

func (r *CheckResult) add(st SourceStatus, err error) {
	if err != nil {
		st.Error, st.Err = err.Error(), err
	}
	r.Sources = append(r.Sources, st)
}

// sourceResult is what one cluster source read.
type sourceResult struct {
	findings []Finding
	skipped  []Skipped
	status   SourceStatus
	err      error
	ran      bool
}

// readCluster reads the cluster sources concurrently: each is a few
// requests that the client retries on throttling or a busy server, so one
// at a time a struggling apiserver would cost a full retry cycle (or a full
// request timeout) per source. Results are added in the fixed source order.
func (k *Check) readCluster(ctx context.Context, c *Cluster, res *CheckResult) ([]Finding, error) {
	readers := map[Source]func(context.Context) sourceResult{
		SourceMetrics: func(ctx context.Context) sourceResult {
			srcs := c.Metrics
			if c.FindMetrics != nil {
				srcs = c.FindMetrics(ctx)
			}
			return readMetricsSource(ctx, srcs)
		},
		SourceObjects: func(ctx context.Context) sourceResult { return k.readObjects(ctx, c) },
		SourceHelm:    func(ctx context.Context) sourceResult { return k.readHelm(ctx, c) },
		SourceCRDs:    func(ctx context.Context) sourceResult { return k.readCRDs(ctx, c) },
	}
	results := make([]sourceResult, len(ClusterSources))
	var wg sync.WaitGroup
	for i, src := range ClusterSources {
		if !k.Sources[src] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = readers[src](ctx)
			results[i].ran = true
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var out []Finding
	for _, r := range results {
		if !r.ran {
			continue
		}
		out = append(out, r.findings...)
		res.NotScanned = append(res.NotScanned, r.skipped...)
		res.add(r.status, r.err)
	}
	return out, nil
}

func readMetricsSource(ctx context.Context, srcs []MetricsSource) sourceResult {
	res := sourceResult{status: SourceStatus{Name: SourceMetrics, Note: MetricNote}}
	fs, skipped, err := ScrapeMetrics(ctx, srcs)
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

func (k *Check) readObjects(ctx context.Context, c *Cluster) sourceResult {
	res := sourceResult{status: SourceStatus{Name: SourceObjects}}
	switch {
	case c.Dynamic == nil && c.Metadata == nil:
		res.err = orErr(c.DynamicErr, "no dynamic client")
		return res
	case c.Served == nil:
		res.err = errors.New("discovery failed")
		return res
	}
	r := &ObjectsReader{Metadata: c.Metadata, Dynamic: c.Dynamic, Table: k.Table, Served: c.Served, Namespace: k.Namespace, Retry: k.Retry}
	or, err := r.Read(ctx, k.Target)
	res.status.Scanned = fmt.Sprintf("%d objects of %d resources", or.Scanned, len(or.Resources))
	if or.StaleAnnotations > 0 {
		res.status.Note = fmt.Sprintf("%d last-applied annotations name a deprecated version that no field manager still writes (stale, not reported)", or.StaleAnnotations)
	}
	res.findings, res.err = or.Findings, err
	return res
}

func (k *Check) readHelm(ctx context.Context, c *Cluster) sourceResult {
	res := sourceResult{status: SourceStatus{Name: SourceHelm}}
	if c.Kube == nil {
		res.err = orErr(c.KubeErr, "no client")
		return res
	}
	h := &HelmReader{Kube: c.Kube, Metadata: c.Metadata, Scanner: &ManifestScanner{Table: k.Table}, Namespace: k.Namespace, History: k.HelmHistory, Retry: k.Retry}
	hr, err := h.Read(ctx)
	res.findings, res.skipped, res.err = hr.Findings, hr.Skipped, err
	res.status.Scanned = fmt.Sprintf("%d releases, %d records", hr.Releases, hr.Records)
	return res
}

func (k *Check) readCRDs(ctx context.Context, c *Cluster) sourceResult {
	res := sourceResult{status: SourceStatus{Name: SourceCRDs}}
	if c.Ext == nil {
		res.err = orErr(c.ExtErr, "no apiextensions client")
		return res
	}
	fs, n, err := (&CRDReader{Client: c.Ext, Retry: k.Retry}).Read(ctx)
	res.status.Scanned = fmt.Sprintf("%d CRDs", n)
	res.findings, res.err = fs, err
	return res
}

func orErr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// MetricsSources returns the apiservers to scrape. The metric is kept per
// instance, so where the kubernetes Service has several endpoints each is
// scraped on its own (with the TLS name "kubernetes", which apiserver
// serving certificates carry); otherwise the kubeconfig's server through
// kube. cfg may be nil (a test client): then only kube is scraped.
func MetricsSources(ctx context.Context, kube kubernetes.Interface, kubeErr error, cfg *rest.Config) []MetricsSource {
	instance := "(kubeconfig server)"
	if cfg != nil && cfg.Host != "" {
		instance = cfg.Host
	}
	fetch := func(c *rest.Config) func(ctx context.Context) (io.ReadCloser, error) {
		return func(ctx context.Context) (io.ReadCloser, error) {
			kc, err := kube, kubeErr
			if c != nil {
				kc, err = kubernetes.NewForConfig(c)
			}
			if err == nil && kc == nil {
				err = errors.New("no client")
			}
			if err != nil {
				return nil, err
			}
			rc, ok := kc.Discovery().RESTClient().(*rest.RESTClient)
			if !ok || rc == nil {
				return nil, errors.New("no REST client for /metrics")
			}
			return rc.Get().AbsPath("/metrics").Param("name[]", DeprecatedAPIsMetric).Stream(ctx)
		}
	}
	def := []MetricsSource{{Instance: instance, Fetch: fetch(nil)}}
	if cfg == nil || kube == nil {
		return def
	}
	slices, err := kube.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
	if err != nil {
		return def
	}
	var out []MetricsSource
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
				out = append(out, MetricsSource{Instance: c.Host, Fetch: fetch(c)})
			}
		}
	}
	if len(out) < 2 {
		return def
	}
	return out
}

// ParseSources reads --source values (comma-separated, repeatable).
func ParseSources(values []string) (map[Source]bool, error) {
	out := map[Source]bool{}
	for _, s := range values {
		for _, p := range strings.Split(s, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if !slices.Contains(AllSources, Source(p)) {
				return nil, fmt.Errorf("unknown --source %q: want metrics, audit, objects, helm, manifests or crds", p)
			}
			out[Source(p)] = true
		}
	}
	return out, nil
}

// LoadTable returns the built-in lifecycle table with the rules files
// merged in, in order. A rules file that cannot be read or parsed is an
// *ErrBadInput of --rules.
func LoadTable(files []string) (*apilifecycle.Table, error) {
	tab := apilifecycle.Builtin()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, badPath("--rules", f, err)
		}
		r, err := apilifecycle.ParseRules(b, f)
		if err != nil {
			// ParseRules names the file itself; ErrBadInput names it once.
			msg := strings.TrimPrefix(err.Error(), "rules file "+f+": ")
			if msg == "rules file "+f+" is empty" {
				msg = "holds nothing to read (0 rules)"
			}
			return nil, &ErrBadInput{Flag: "--rules", Path: f, Err: errors.New(msg)}
		}
		tab = tab.With(r)
	}
	return tab, nil
}
