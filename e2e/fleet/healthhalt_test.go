//go:build e2e

package fleete2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// ttftExporter serves one gauge per cluster, e2e_ttft_p99_seconds{cluster},
// set by the test: a model server's p99 time to first token as each
// cluster's monitoring would label it.
type ttftExporter struct {
	mu    sync.Mutex
	value map[string]string
}

func (x *ttftExporter) set(cluster, v string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.value[cluster] = v
}

func (x *ttftExporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# TYPE e2e_ttft_p99_seconds gauge")
	for c, v := range x.value {
		fmt.Fprintf(w, "e2e_ttft_p99_seconds{cluster=%q} %s\n", c, v)
	}
}

// gateChecks decodes a gate report (fleet gate -o json, or a gate step's
// report.json) and returns its checks by "name cluster".
func gateChecks(t *testing.T, b string) (*fleetrun.GateReport, map[string]fleetrun.Check) {
	t.Helper()
	var g fleetrun.GateReport
	if err := json.Unmarshal([]byte(b), &g); err != nil {
		t.Fatalf("gate report: %v\n%s", err, b)
	}
	out := map[string]fleetrun.Check{}
	for _, c := range g.Checks {
		k := c.Name + " " + c.Cluster
		if c.Name == "promql" {
			k += " " + strings.SplitN(c.Message, ":", 2)[0]
		}
		out[k] = c
	}
	return &g, out
}

// TestFleetHaltsOnAlertsAndPromQL steps a run by hand whose Fleet file
// halts on the real Alertmanager's alerts (severity critical, the
// cluster's own by clusterLabel) and on PromQL checks against the real
// Prometheus, each query selecting the cluster being gated by $cluster:
// clean, both clusters' gates go; a critical alert posted for canary and
// canary's TTFT pushed past its ceiling halt canary's gate step, the
// evidence naming the alert and the query's value, while prod's series
// and alerts leave prod's gate at go; resolved and approved, canary goes,
// its preflight step records its TTFT as the baseline, and a regression
// past baseline x maxRatio halts its gate again, naming baseline and now.
func TestFleetHaltsOnAlertsAndPromQL(t *testing.T) {
	e := env(t)
	began := time.Now()
	ctx := context.Background()
	e.resetPools(t, canary, prod)
	t.Cleanup(func() { e.resetPools(t, canary, prod) })

	exp := &ttftExporter{value: map[string]string{canary: "0.2", prod: "0.2"}}
	srv := httptest.NewServer(exp)
	defer srv.Close()
	prom := plugintest.StartPrometheus(t, e.planes[canary], srv.URL)
	am := plugintest.StartAlertmanager(t)
	plugintest.WaitQuery(t, prom, `max(e2e_ttft_p99_seconds{cluster="canary"})`, 0.2)
	plugintest.WaitQuery(t, prom, `max(e2e_ttft_p99_seconds{cluster="prod"})`, 0.2)

	dir := t.TempDir()
	h := &handRun{e: e, run: "halts", store: e.s3Store("halts"), file: filepath.Join(dir, "fleet.yaml")}
	y := fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: halts}
spec:
  target: {version: %s}
  clusters:
  - {name: canary, labels: {gpufleet.dev/ring: east}}
  - {name: prod, labels: {gpufleet.dev/ring: east}}
  rings:
  - {name: east, selector: {matchLabels: {gpufleet.dev/ring: east}}, maxConcurrent: 2}
  caps: {maxConcurrentClusters: 2, maxGPUPercentInFlight: 100}
  credentials: {secretNamespace: argo}
  haltOn:
  - {check: alerts, alertmanagerURL: %q, matchers: ['severity="critical"'], clusterLabel: cluster}
  - check: promql
    prometheusURL: %q
    queries:
    - {name: ttft-p99, expr: 'max(e2e_ttft_p99_seconds{cluster="$cluster"})', maxRatio: 1.5}
    - {name: ttft-p99-ceiling, expr: 'max(e2e_ttft_p99_seconds{cluster="$cluster"})', max: 0.4}
  upgrade:
    stepDuration: 10s
    drain: {onTimeout: stop, ackTimeout: 3s}
    actions:
    - command:
        pool: "democluster upgrade-pool --kubeconfig {{.Kubeconfig}} --context {{.Context}} --selector {{.Selector}} --kubelet {{.Version}}"
  store: {url: %q}
`, target, am, prom, h.store)
	st, p := h.plan(ctx, t, y)
	preview := func(cluster string) (plugintest.Result, *fleetrun.GateReport, map[string]fleetrun.Check) {
		t.Helper()
		r := h.skew(t, "fleet", "gate", "--store", h.store, "--run", h.run, "--cluster", cluster, "-o", "json")
		g, cs := gateChecks(t, r.Stdout)
		return r, g, cs
	}

	// Clean: both gates go; the ceiling is judged, the ratio waits for a
	// baseline, no alert of either cluster.
	for _, c := range []string{canary, prod} {
		r, g, cs := preview(c)
		if r.ExitCode != 0 || g.Verdict != "go" || cs["alerts "+c].Result != fleetrun.CheckPass ||
			!strings.Contains(cs["alerts "+c].Message, fmt.Sprintf(`cluster=%q`, c)) ||
			cs["promql "+c+" ttft-p99-ceiling"].Result != fleetrun.CheckPass || cs["promql "+c+" ttft-p99"].Result != fleetrun.CheckSkip {
			t.Fatalf("%s clean: want go with alerts and the ceiling passing, the ratio skipped\n%s", c, r)
		}
	}

	// Canary's faults: a critical alert labelled with its name and its
	// TTFT past the ceiling. Prod's alerts and series are its own.
	plugintest.PostAlert(t, am, map[string]string{"alertname": "NodeDown", "severity": "critical", "cluster": canary}, time.Now().Add(time.Hour))
	plugintest.PostAlert(t, am, map[string]string{"alertname": "DiskFilling", "severity": "warning", "cluster": prod}, time.Now().Add(time.Hour))
	exp.set(canary, "0.5")
	plugintest.WaitQuery(t, prom, `max(e2e_ttft_p99_seconds{cluster="canary"})`, 0.5)
	if r, g, cs := preview(prod); r.ExitCode != 0 || g.Verdict != "go" || cs["promql prod ttft-p99-ceiling"].Result != fleetrun.CheckPass ||
		!strings.HasPrefix(cs["promql prod ttft-p99-ceiling"].Message, "ttft-p99-ceiling: now 0.2") {
		t.Fatalf("prod with canary's alert and regression: want go on prod's own series and alerts\n%s", r)
	}
	res, r := h.step(t, canary, "gate")
	if r.ExitCode != 1 || res.Phase != fleetrun.PhaseFailed || !strings.Contains(res.Message, "NodeDown") {
		t.Fatalf("canary's gate with NodeDown firing: want exit 1 naming the alert, got exit %d: %s\n%s", r.ExitCode, res.Message, r)
	}
	_, cs := gateChecks(t, evidenceFile(t, st, res.Evidence, "report.json"))
	if a := cs["alerts canary"]; a.Result != fleetrun.CheckFail || !strings.Contains(a.Message, "1 active alert: NodeDown{") || !strings.Contains(a.Message, `cluster="canary"`) {
		t.Errorf("alerts check: %+v", a)
	}
	if c := cs["promql canary ttft-p99-ceiling"]; c.Result != fleetrun.CheckFail || !strings.Contains(c.Message, "ttft-p99-ceiling: now 0.5") || !strings.Contains(c.Message, "at most 0.4") {
		t.Errorf("promql ceiling check: %+v", c)
	}
	if _, states := h.states(t, st, p); states[canary].AdmittedAt != nil {
		t.Errorf("canary admitted under a halting gate")
	}

	// Resolved: the alert ended, TTFT back; approved, canary goes.
	plugintest.PostAlert(t, am, map[string]string{"alertname": "NodeDown", "severity": "critical", "cluster": canary}, time.Now())
	exp.set(canary, "0.2")
	plugintest.WaitQuery(t, prom, `max(e2e_ttft_p99_seconds{cluster="canary"})`, 0.2)
	if err := harness.Eventually(ctx, "NodeDown resolved", 30*time.Second, func(ctx context.Context) (bool, error) {
		as, err := health.ReadAlerts(ctx, health.AlertmanagerAccess{URL: am, Matchers: []string{`cluster="canary"`}})
		return err == nil && len(as) == 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.decide(t, "approve", "alice", "--ring", "east", "--reason", "NodeDown resolved, TTFT back")
	if res, r := h.step(t, canary, "gate"); r.ExitCode != 0 {
		t.Fatalf("canary's gate, clean again: exit %d: %s", r.ExitCode, res.Message)
	}
	// The preflight step records canary's TTFT in the baseline the ratio
	// is judged against.
	cp, _ := p.Cluster(canary)
	for _, s := range cp.Steps {
		if s.Kind == fleetrun.StepGate {
			continue
		}
		if res, r := h.step(t, canary, s.Name); r.ExitCode != 0 {
			t.Fatalf("canary's step %s: exit %d: %s\n%s", s.Name, r.ExitCode, res.Message, r)
		}
		if s.Kind == fleetrun.StepPreflight {
			break
		}
	}
	exp.set(canary, "0.35")
	plugintest.WaitQuery(t, prom, `max(e2e_ttft_p99_seconds{cluster="canary"})`, 0.35)
	r, g, cs := preview(canary)
	ratio := cs["promql canary ttft-p99"]
	if r.ExitCode != 1 || g.Verdict != "halt" || ratio.Result != fleetrun.CheckFail ||
		!strings.Contains(ratio.Message, "ttft-p99: now 0.35, baseline 0.2, at most 0.3 (1.5 x baseline)") ||
		cs["promql canary ttft-p99-ceiling"].Result != fleetrun.CheckPass {
		t.Fatalf("canary's TTFT from 0.2 to 0.35 under maxRatio 1.5, below the ceiling: want halt on the ratio alone\n%s", r)
	}
	t.Logf("alerts and promql halts, by hand: %s", time.Since(began).Round(time.Second))
}
