package preflight

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

func fp(v float64) *float64 { return &v }

func TestVerifyPromQL(t *testing.T) {
	prom := &health.PrometheusAccess{URL: "http://prom:9090"}
	ttft := health.PromQLCheck{Name: "ttft", Expr: "max(ttft)", MaxRatio: fp(1.5)}
	lists := health.PromQLCheck{Name: "lists", Expr: "sum(lists)", Min: fp(1)}
	late := health.PromQLCheck{Name: "late", Expr: "max(late)", MaxRatio: fp(2)}
	base := Evidence{Health: &HealthEvidence{Prometheus: prom, PromQL: []health.PromQLResult{
		{PromQLCheck: ttft, Value: fp(0.2)}, {PromQLCheck: lists, Value: fp(5)}, {PromQLCheck: late, Unread: "no sample"}}}}
	now := Evidence{Health: &HealthEvidence{Prometheus: prom, PromQL: []health.PromQLResult{
		{PromQLCheck: ttft, Value: fp(0.3)}, {PromQLCheck: lists, Value: fp(5)}, {PromQLCheck: late, Value: fp(1)}}}}
	regs := verifyHealth(base, now)
	if len(regs) != 1 || regs[0].Object != "late" || regs[0].Status != StatusUnknown || !strings.Contains(regs[0].Message, "the baseline could not read it: no sample") {
		t.Fatalf("within bounds, one ratio check without a baseline value: %+v", regs)
	}

	now.Health.PromQL[0].Value = fp(0.5)
	now.Health.PromQL[1] = health.PromQLResult{PromQLCheck: lists, Unread: "no sample: the expression selects no series now"}
	now.Health.PromQL = now.Health.PromQL[:2]
	regs = verifyHealth(base, now)
	if len(regs) != 2 {
		t.Fatalf("want a FAIL and an UNKNOWN: %+v", regs)
	}
	if r := regs[0]; r.Kind != RegPromQL || r.Object != "ttft" || r.Status != "" || r.Message != "ttft: now 0.5, baseline 0.2, at most 0.3 (1.5 x baseline)" ||
		r.Command != "curl -sG http://prom:9090/api/v1/query --data-urlencode 'query=max(ttft)'" {
		t.Errorf("regression: %+v", r)
	}
	if r := regs[1]; r.Object != "lists" || r.Status != StatusUnknown || !strings.Contains(r.Message, "no sample") {
		t.Errorf("no sample now: %+v", r)
	}
	// The same name with another expression: the baseline's value is of
	// another query.
	changed := ttft
	changed.Expr = "max(ttft_seconds)"
	now.Health.PromQL = []health.PromQLResult{{PromQLCheck: changed, Value: fp(0.25)}}
	regs = verifyHealth(base, now)
	if len(regs) != 1 || regs[0].Object != "ttft" || regs[0].Status != StatusUnknown || !strings.Contains(regs[0].Message, "expression changed since the baseline") {
		t.Errorf("expression changed: %+v", regs)
	}
	// The gate did not run now: nothing to compare.
	if regs := verifyHealth(base, Evidence{Health: &HealthEvidence{}}); len(regs) != 0 {
		t.Errorf("no promql now: %+v", regs)
	}
}

func TestPromQLGate(t *testing.T) {
	values := map[string]string{"max(ttft)": "0.2", "sum(lists)": "0"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		v, ok := values[r.Form.Get("query")]
		if !ok {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
			return
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1796540846.529,%q]}]}}`, v)
	}))
	defer srv.Close()
	r := &Runner{Health: HealthOptions{PromQL: true, Prometheus: health.PrometheusAccess{URL: srv.URL},
		PromQLChecks: []health.PromQLCheck{{Name: "ttft", Expr: "max(ttft)", MaxRatio: fp(1.5)}}}}
	g, res := r.promqlGate(context.Background())
	if g.Status != StatusPass || len(res) != 1 || *res[0].Value != 0.2 || g.Evidence[0] != "PASS ttft: 0.2 recorded as the baseline (verify: at most 1.5 x baseline)" {
		t.Fatalf("ratio check: %+v %+v", g, res)
	}
	r.Health.PromQLChecks = append(r.Health.PromQLChecks, health.PromQLCheck{Name: "absent", Expr: "absent_metric", Max: fp(1)})
	if g, _ := r.promqlGate(context.Background()); g.Status != StatusUnknown || !strings.Contains(g.Message, "first absent") || !strings.Contains(g.Evidence[1], "UNKNOWN absent: no sample") {
		t.Errorf("no sample: %+v", g)
	}
	r.Health.PromQLChecks = append(r.Health.PromQLChecks, health.PromQLCheck{Name: "lists", Expr: "sum(lists)", Min: fp(1)})
	if g, _ := r.promqlGate(context.Background()); g.Status != StatusFail || !strings.Contains(g.Message, "first lists") || !strings.HasSuffix(g.Command, "'query=sum(lists)'") {
		t.Errorf("below the floor: %+v", g)
	}
	r.Health.Prometheus.URL = ""
	if g, res := r.promqlGate(context.Background()); g.Status != StatusUnknown || res[0].Unread != "no Prometheus URL: pass --prometheus-url" {
		t.Errorf("no URL: %+v %+v", g, res)
	}
}

// TestVerifyPromQLOnEmpty: a check with onEmpty: pass that read NaN at a
// quiet baseline and a value now has nothing to compare with and passes;
// without onEmpty it stays UNKNOWN, and no sample now passes too.
func TestVerifyPromQLOnEmpty(t *testing.T) {
	prom := &health.PrometheusAccess{URL: "http://prom:9090"}
	ttft := health.PromQLCheck{Name: "ttft", Expr: "max(ttft)", MaxRatio: fp(1.2), OnEmpty: health.OnEmptyPass}
	base := Evidence{Health: &HealthEvidence{Prometheus: prom, PromQL: []health.PromQLResult{{PromQLCheck: ttft, Unread: "the value is NaN", Empty: true}}}}
	now := Evidence{Health: &HealthEvidence{Prometheus: prom, PromQL: []health.PromQLResult{{PromQLCheck: ttft, Value: fp(0.3)}}}}
	if regs := verifyHealth(base, now); len(regs) != 0 {
		t.Errorf("empty at the baseline, onEmpty: pass: %+v", regs)
	}
	now.Health.PromQL[0] = health.PromQLResult{PromQLCheck: ttft, Unread: "no sample", Empty: true}
	if regs := verifyHealth(base, now); len(regs) != 0 {
		t.Errorf("empty now, onEmpty: pass: %+v", regs)
	}
	strict := ttft
	strict.OnEmpty = ""
	base.Health.PromQL[0].PromQLCheck = strict
	now.Health.PromQL[0] = health.PromQLResult{PromQLCheck: strict, Value: fp(0.3)}
	if regs := verifyHealth(base, now); len(regs) != 1 || regs[0].Status != StatusUnknown {
		t.Errorf("empty at the baseline, no onEmpty: %+v", regs)
	}
}
