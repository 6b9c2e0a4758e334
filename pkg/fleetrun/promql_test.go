package fleetrun

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// TestPromQLHaltCheck: the promql halt check runs each query with
// "$cluster" replaced, judges maxRatio against the value the cluster's
// pre-flight baseline (read from the store) recorded, skips it before
// there is a baseline, and is UNKNOWN on no sample.
func TestPromQLHaltCheck(t *testing.T) {
	ttft := "0.2"
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		queries = append(queries, r.Form.Get("query"))
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Form.Get("query"), "absent") {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
			return
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1796540846.529,%q]}]}}`, ttft)
	}))
	defer srv.Close()
	ratio, ceiling := 1.5, 1.0
	h := fleetfile.HaltCheck{Check: "promql", PrometheusURL: srv.URL, Queries: []health.PromQLCheck{
		{Name: "ttft", Expr: `max(ttft{cluster="$cluster"})`, MaxRatio: &ratio},
		{Name: "cap", Expr: `max(ttft{cluster="$cluster"})`, Max: &ceiling},
	}}
	store := tempStore(t)
	p := &Programme{Store: store}
	st := &ClusterState{}
	base := p.promqlBaselineOf(st)

	checks := haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, base)
	if len(checks) != 2 || checks[0].Result != CheckSkip || !strings.Contains(checks[0].Message, "no pre-flight baseline") || checks[1].Result != CheckPass {
		t.Fatalf("before the baseline: %+v", checks)
	}
	if queries[0] != `max(ttft{cluster="prod-usw2"})` {
		t.Errorf("query %q, want $cluster replaced", queries[0])
	}

	// The baseline as skew preflight --save writes it.
	st.Baseline = "run/prod-usw2/preflight/1/baseline.yaml"
	if err := store.Write(context.Background(), st.Baseline, []byte(`apiVersion: gpufleet.dev/v1alpha1
kind: SkewPreflightReport
evidence:
  health:
    prometheus: {url: "`+srv.URL+`"}
    promql:
    - {name: ttft, expr: 'max(ttft{cluster="prod-usw2"})', maxRatio: 1.5, value: 0.2}
`)); err != nil {
		t.Fatal(err)
	}
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, base)
	if checks[0].Result != CheckPass || checks[0].Message != "ttft: now 0.2, baseline 0.2, at most 0.3 (1.5 x baseline)" {
		t.Errorf("at the baseline: %+v", checks[0])
	}
	ttft = "0.5"
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, base)
	if checks[0].Result != CheckFail || checks[0].Message != "ttft: now 0.5, baseline 0.2, at most 0.3 (1.5 x baseline)" || checks[1].Result != CheckPass {
		t.Errorf("regressed: %+v", checks)
	}

	h.Queries = append(h.Queries, health.PromQLCheck{Name: "gone", Expr: "absent_metric", MaxRatio: &ratio})
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, base)
	if checks[2].Result != CheckUnknown || !strings.Contains(checks[2].Message, "gone: no sample") {
		t.Errorf("no sample: %+v", checks[2])
	}
	ttft = "0.1"
	h.Queries[2].Expr = "present"
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, base)
	if checks[2].Result != CheckUnknown || !strings.Contains(checks[2].Message, "did not record it") {
		t.Errorf("not in the baseline: %+v", checks[2])
	}

	// The Fleet file's expression edited since the baseline was taken.
	edited := h
	edited.Queries = []health.PromQLCheck{{Name: "ttft", Expr: `max(ttft_seconds{cluster="$cluster"})`, MaxRatio: &ratio}}
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{edited}, "prod-usw2", 0, 0, nil, base)
	if checks[0].Result != CheckUnknown || !strings.Contains(checks[0].Message, "expression changed since the baseline") {
		t.Errorf("expression changed: %+v", checks[0])
	}

	st.Baseline = "run/missing.yaml"
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, base)
	if checks[0].Result != CheckUnknown || !strings.Contains(checks[0].Message, "reading the pre-flight baseline run/missing.yaml") {
		t.Errorf("baseline unreadable: %+v", checks[0])
	}
}

// TestPromQLPreflightFlags: the preflight step passes the halt check's
// Prometheus and queries, for the cluster, to skew preflight.
func TestPromQLPreflightFlags(t *testing.T) {
	dir := t.TempDir()
	if f, err := promqlFlags([]fleetfile.HaltCheck{{Check: "alerts"}}, "c", dir); err != nil || f != nil {
		t.Fatalf("no promql check: %q %v", f, err)
	}
	limit := 2.0
	f, err := promqlFlags([]fleetfile.HaltCheck{{Check: "promql", PrometheusURL: "http://prom.$cluster:9090",
		Queries: []health.PromQLCheck{{Name: "restarts", Expr: `sum(increase(kube_pod_container_status_restarts_total{cluster="$cluster"}[1h]))`, MaxRatio: &limit}}}}, "prod-usw2", dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "promql-checks.yaml")
	if strings.Join(f, " ") != "--prometheus-url http://prom.prod-usw2:9090 --promql-checks "+path {
		t.Errorf("flags %q", f)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := health.ParsePromQLChecks(b)
	if err != nil || len(cs) != 1 || cs[0].Expr != `sum(increase(kube_pod_container_status_restarts_total{cluster="prod-usw2"}[1h]))` || *cs[0].MaxRatio != 2 {
		t.Errorf("checks file %s: %+v %v", b, cs, err)
	}
}
