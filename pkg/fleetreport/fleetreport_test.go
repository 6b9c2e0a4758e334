package fleetreport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport/metricstest"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func gpuNode(name, pool, kubelet string, gpus int64) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"cloud.google.com/gke-nodepool": pool, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: kubelet},
		},
	}
}

func cluster(ctxName, server, gitVersion string, objs ...runtime.Object) *cli.TestClientGetter {
	c := fake.NewClientset(objs...)
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: gitVersion}
	return &cli.TestClientGetter{KubeClient: c, Meta: cli.Metadata{Context: ctxName, Server: server}}
}

// collect is the plugin's single-context read in small: connect, then
// pkg/skew's collector with GPU counts.
func collect(ctx context.Context, cg cli.ClientGetter) (cli.Metadata, skew.Inventory, error) {
	md, err := cli.Connect(ctx, cg)
	if err != nil {
		return md, skew.Inventory{}, err
	}
	kc, err := cg.Kube()
	if err != nil {
		return md, skew.Inventory{}, err
	}
	inv, err := (&skew.Collector{Client: kc, CountGPUs: true, Now: func() time.Time { return now }}).Collect(ctx)
	return md, inv, cli.ClassifyClusterErr(err, md, "reading the version inventory")
}

const fleetYAML = `apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: gpu-prod}
spec:
  clusters:
  - {name: canary, context: ctx-canary, labels: {gpufleet.dev/ring: canary}}
  - {name: prod-a, context: ctx-prod, provider: eks, labels: {gpufleet.dev/ring: prod}}
  - {name: old, context: ctx-old, labels: {env: lab}}
  - {name: dead, context: ctx-dead, labels: {gpufleet.dev/ring: prod}}
  - {name: ghost, context: no-such-context, labels: {gpufleet.dev/ring: prod}}
  rings:
  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}}
  - {name: prod, selector: {matchLabels: {gpufleet.dev/ring: prod}}}
`

func testReport(t *testing.T) (*Report, string) {
	t.Helper()
	f, err := fleetfile.Load([]byte(fleetYAML))
	if err != nil {
		t.Fatal(err)
	}
	g := &cli.TestClientGetter{Meta: cli.Metadata{Context: "ctx-canary"}, PerContext: map[string]*cli.TestClientGetter{
		"ctx-canary": cluster("ctx-canary", "https://canary.example:6443", "v1.37.2",
			gpuNode("c-0", "h100", "v1.37.2", 8), gpuNode("c-1", "h100", "v1.37.2", 8)),
		// Kubelets three minors behind: at the edge of the skew policy.
		"ctx-prod": cluster("ctx-prod", "https://prod.example:6443", "v1.36.1-eks-1234",
			gpuNode("p-0", "train", "v1.33.5", 8), gpuNode("p-1", "train", "v1.36.1", 4)),
		"ctx-old": cluster("ctx-old", "https://old.example:6443", "v1.32.10"),
		"ctx-dead": {Meta: cli.Metadata{Context: "ctx-dead", Server: "https://dead.example:6443"},
			Err: cli.ClassifyClusterErr(errors.New("dial tcp 10.0.0.1:6443: connect: connection refused"), cli.Metadata{Context: "ctx-dead"}, "cannot reach the cluster")},
	}}
	dir := t.TempDir()
	save := func(cluster, body string) {
		p := filepath.Join(dir, "latest", cluster, "preflight.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save("canary", `{"apiVersion":"gpufleet.dev/v1alpha1","kind":"SkewPreflightReport","target":"1.38","items":[],
		"evidence":{"collectedAt":"2026-12-02T12:00:00Z","inventory":{}},"summary":{"status":"WARN","pass":9,"warn":1}}`)
	save("prod-a", `{"kind": "SomethingElse"}`)
	storeURL := "file://" + dir
	st, err := fleetrun.OpenStore(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Targets: FleetTargets(f), Getter: g, Collect: collect, Parallel: 2,
		Calendar: skew.DefaultCalendar(), Store: st, StoreURL: storeURL, Now: func() time.Time { return now }, Source: "fleet.yaml", Fleet: f.Metadata.Name})
	if err != nil {
		t.Fatal(err)
	}
	return rep, dir
}

func TestRun(t *testing.T) {
	rep, _ := testReport(t)
	if rep.Kind != Kind || rep.APIVersion != cli.ReportAPIVersion(Kind) || rep.Metadata.PatchDataDate == "" || rep.Metadata.CalendarDate == "" {
		t.Errorf("header: %+v", rep.Metadata)
	}
	if len(rep.Clusters) != 5 {
		t.Fatalf("%d rows, want one per cluster (5)", len(rep.Clusters))
	}
	by := map[string]Cluster{}
	for _, c := range rep.Clusters {
		by[c.Name] = c
	}
	canary := by["canary"]
	if canary.Error != "" || canary.Ring != "canary" || canary.Version != "v1.37.2" || canary.GPUs != 16 || canary.Nodes != 2 {
		t.Errorf("canary: %+v", canary)
	}
	if canary.Patch == nil || canary.Patch.Latest != "v1.37.2" || !canary.Patch.AtLeast || !strings.Contains(canary.Patch.Message, "as of 2026-10-27") {
		t.Errorf("canary patch: %+v", canary.Patch)
	}
	if canary.Preflight == nil || canary.Preflight.Verdict != "warn" || canary.Preflight.Target != "1.38" || canary.Preflight.AgeSeconds != 2*86400 {
		t.Errorf("canary preflight: %+v", canary.Preflight)
	}
	if len(canary.Pools) != 1 || len(canary.Pools[0].GPUs) != 1 || canary.Pools[0].GPUs[0].Product != "NVIDIA-H100-80GB-HBM3" {
		t.Errorf("canary pools: %+v", canary.Pools)
	}
	prod := by["prod-a"]
	if prod.Provider != "eks" || prod.ProviderSource != "fleet file" || prod.MaxSkew != 3 || len(prod.PoolsAtEdge) != 1 || prod.PoolsAtEdge[0] != "train" {
		t.Errorf("prod-a: %+v", prod)
	}
	if prod.Patch == nil || prod.Patch.PatchesBehind != 2 || prod.Patch.Latest != "v1.36.3" {
		t.Errorf("prod-a patch: %+v", prod.Patch)
	}
	if prod.Preflight == nil || prod.Preflight.Error == "" || prod.Preflight.Verdict != "" {
		t.Errorf("a saved report of another kind is an error on the row: %+v", prod.Preflight)
	}
	old := by["old"]
	if old.Ring != "" || old.Support == nil || old.Support.Status != skew.StatusViolation || old.Patch.PatchesBehind != 3 {
		t.Errorf("old: %+v", old)
	}
	if old.Preflight != nil {
		t.Errorf("old has no saved pre-flight: %+v", old.Preflight)
	}
	dead := by["dead"]
	if dead.ExitCode != cli.ExitUnavailable || !strings.Contains(dead.Error, "connection refused") || dead.Server != "https://dead.example:6443" {
		t.Errorf("dead: %+v", dead)
	}
	ghost := by["ghost"]
	if ghost.ExitCode != cli.ExitUsage || !strings.Contains(ghost.Error, `context "no-such-context" is not in the kubeconfig`) {
		t.Errorf("ghost: %+v", ghost)
	}
	if rep.ExitCode() != cli.ExitUsage {
		t.Errorf("exit %d, want the worst (2)", rep.ExitCode())
	}
	s := rep.Summary
	if s.Clusters != 5 || s.Reachable != 3 || s.Errors != 2 || s.OutOfSupport != 1 || s.BehindPatch != 2 || s.GPUs != 28 || s.Versions["1.37"] != 1 {
		t.Errorf("summary: %+v", s)
	}
}

func TestRunContexts(t *testing.T) {
	g := &cli.TestClientGetter{Meta: cli.Metadata{Context: "a"}, PerContext: map[string]*cli.TestClientGetter{
		"a": cluster("a", "https://a:6443", "v1.36.3", gpuNode("n", "p", "v1.36.3", 8)),
	}}
	rep, err := Run(context.Background(), Options{Targets: ContextTargets([]string{"a", "a-typo"}), Getter: g, Collect: collect, Parallel: 4,
		Calendar: skew.DefaultCalendar(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Clusters) != 2 || rep.Clusters[0].Error != "" || rep.Clusters[0].Ring != "" || rep.Clusters[1].ExitCode != cli.ExitUsage {
		t.Errorf("rows: %+v", rep.Clusters)
	}
}

func TestMetrics(t *testing.T) {
	rep, _ := testReport(t)
	problems, err := testutil.CollectAndLint(collector{rep})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	var buf bytes.Buffer
	if err := WriteMetrics(&buf, rep); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	if !strings.HasSuffix(text, "# EOF\n") {
		t.Errorf("OpenMetrics text does not end with # EOF:\n%s", text)
	}
	// Prometheus' own OpenMetrics parser reads it back.
	families := metricstest.Parse(t, text, metricstest.OpenMetrics)
	for name, mf := range families {
		for _, m := range mf.Metric {
			var cluster, ring bool
			for _, l := range m.Label {
				cluster = cluster || l.GetName() == "cluster"
				ring = ring || l.GetName() == "ring"
			}
			if !cluster || !ring {
				t.Errorf("%s: a series without cluster and ring: %v", name, m.Label)
			}
		}
	}
	value := families.Value
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{MetricClusterInfo, map[string]string{"cluster": "canary", "ring": "canary", "provider": "gke", "version": "v1.37.2"}, 1},
		{MetricClusterUp, map[string]string{"cluster": "dead", "ring": "prod"}, 0},
		{MetricClusterUp, map[string]string{"cluster": "canary"}, 1},
		{MetricClusterError, map[string]string{"cluster": "ghost", "exit_code": "2"}, 1},
		{MetricPatchInfo, map[string]string{"cluster": "prod-a", "latest": "v1.36.3", "lower_bound": "true"}, 1},
		{MetricPatchesBehind, map[string]string{"cluster": "prod-a"}, 2},
		{MetricPatchLag, map[string]string{"cluster": "old"}, 281 * 86400},
		{MetricSupportInfo, map[string]string{"cluster": "old", "status": "violation", "minor": "1.32"}, 1},
		{MetricSupportEnd, map[string]string{"cluster": "canary"}, float64(time.Date(2027, 10, 28, 0, 0, 0, 0, time.UTC).Unix())},
		{MetricMaxSkew, map[string]string{"cluster": "prod-a"}, 3},
		{MetricPoolAtEdge, map[string]string{"cluster": "prod-a", "pool": "train"}, 1},
		{MetricPoolNodes, map[string]string{"cluster": "prod-a", "pool": "train", "kubelet_version": "v1.33.5"}, 1},
		{MetricPoolGPUs, map[string]string{"cluster": "canary", "pool": "h100", "resource": "nvidia.com/gpu", "product": "NVIDIA-H100-80GB-HBM3"}, 16},
		{MetricClusterGPUs, map[string]string{"cluster": "prod-a"}, 12},
		{MetricPreflightInfo, map[string]string{"cluster": "canary", "verdict": "warn", "target": "1.38"}, 1},
		{MetricPreflightInfo, map[string]string{"cluster": "prod-a", "verdict": "error"}, 1},
		{MetricPreflightTime, map[string]string{"cluster": "canary"}, float64(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).Unix())},
	} {
		if got, ok := value(tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := value(MetricClusterNodes, map[string]string{"cluster": "dead"}); ok {
		t.Error("a cluster that was not read has no node count")
	}
}

func TestPush(t *testing.T) {
	rep, _ := testReport(t)
	var method, path string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path = r.Method, r.URL.Path
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if err := Push(context.Background(), srv.URL, "", rep); err != nil {
		t.Fatal(err)
	}
	if method != http.MethodPut || path != "/metrics/job/gpufleet_fleet_inventory/fleet/gpu-prod" || !bytes.Contains(body, []byte(MetricClusterInfo)) {
		t.Errorf("push: %s %s, %d bytes", method, path, len(body))
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusBadRequest) }))
	defer bad.Close()
	if err := Push(context.Background(), bad.URL, "", rep); err == nil || !strings.Contains(err.Error(), bad.URL) {
		t.Errorf("a refused push: %v", err)
	}
}

func TestHTML(t *testing.T) {
	rep, _ := testReport(t)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`data-cluster="canary"`, `data-cluster="ghost"`, `class="timeline-row"`, `class="support-window window-violation" data-minor="1.32"`,
		`class="ring-spread" data-ring="prod"`, `data-minor="1.37"`, `not in the kubeconfig`, `class="preflight warn">WARN for 1.38, 2d0h old`, "Fleet inventory of gpu-prod",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Self-contained: nothing that fetches (scripts, links, images, CSS
	// imports); xmlns is a name, not a fetch.
	fetch := regexp.MustCompile(`(?i)<script|<link|<img|<iframe|@import|url\(|\b(src|href)=`)
	if m := fetch.FindString(page); m != "" {
		t.Errorf("the page would fetch something: %q", m)
	}
}

// TestReadPreflight: a saved report that is not a pre-flight is an
// error of the row; a missing one (fs.ErrNotExist, which the programme's
// store's ErrNotFound is) is no pre-flight at all.
func TestReadPreflight(t *testing.T) {
	ctx := context.Background()
	st := memStore{"latest/x/preflight.json": "{}"}
	if p := readPreflight(ctx, st, "mem://fleet", "x", now); p == nil || p.Error == "" {
		t.Errorf("an empty saved report: %+v", p)
	}
	if p := readPreflight(ctx, st, "mem://fleet", "y", now); p != nil {
		t.Errorf("no saved report: %+v", p)
	}
	dir, err := fleetrun.OpenStore(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p := readPreflight(ctx, dir, "file://dir", "y", now); p != nil {
		t.Errorf("no saved report in the programme's store: %+v", p)
	}
}

// A saved pre-flight's verdict is the word its JSON writes now (ok,
// warn, unknown, fail; gpufleet.dev/v1alpha3) whichever release saved
// it: a report of gpufleet.dev/v1alpha2 or earlier wrote PASS, WARN,
// UNKNOWN, FAIL. A word of neither is an error of the row.
func TestReadPreflightWords(t *testing.T) {
	ctx := context.Background()
	for saved, want := range map[string]string{"PASS": "ok", "WARN": "warn", "UNKNOWN": "unknown", "FAIL": "fail",
		"ok": "ok", "warn": "warn", "unknown": "unknown", "fail": "fail"} {
		st := memStore{"latest/x/preflight.json": `{"kind":"SkewPreflightReport","target":"1.38","summary":{"status":"` + saved + `"}}`}
		if p := readPreflight(ctx, st, "mem://fleet", "x", now); p == nil || p.Error != "" || p.Verdict != want {
			t.Errorf("saved status %q: %+v, want verdict %q", saved, p, want)
		}
	}
	st := memStore{"latest/x/preflight.json": `{"kind":"SkewPreflightReport","target":"1.38","summary":{"status":"Pass"}}`}
	if p := readPreflight(ctx, st, "mem://fleet", "x", now); p == nil || p.Error == "" || p.Verdict != "" {
		t.Errorf("saved status Pass: %+v, want an error", p)
	}
}

type memStore map[string]string

func (m memStore) Read(_ context.Context, key string) ([]byte, error) {
	if v, ok := m[key]; ok {
		return []byte(v), nil
	}
	return nil, fs.ErrNotExist
}
