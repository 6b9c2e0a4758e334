//go:build e2e

package skewe2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// The promql gate against a real Prometheus scraping the local apiserver
// and an exporter the test controls: preflight --save records the
// exporter's time to first token as the baseline and passes an absolute
// floor on the apiserver's own request count; the exporter's value grows
// past baseline x maxRatio and verify FAILs naming the baseline and the
// value now; a query that selects no series is UNKNOWN, not a pass.
func TestPromQLGate(t *testing.T) {
	cp := scenario(t)
	var ttft atomic.Value
	ttft.Store("0.2")
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE e2e_ttft_p99_seconds gauge\ne2e_ttft_p99_seconds{model=\"llama\"} %s\n", ttft.Load())
	}))
	defer exporter.Close()
	prom := plugintest.StartPrometheus(t, cp, exporter.URL)
	plugintest.WaitQuery(t, prom, `up{job="apiserver"}`, 1)
	plugintest.WaitQuery(t, prom, `max(e2e_ttft_p99_seconds)`, 0.2)

	dir := t.TempDir()
	checks := filepath.Join(dir, "checks.yaml")
	if err := os.WriteFile(checks, []byte(`- name: ttft-p99
  expr: max(e2e_ttft_p99_seconds{model="llama"})
  maxRatio: 1.5
- name: apiserver-lists
  expr: sum(apiserver_request_duration_seconds_count{job="apiserver",verb="LIST"})
  min: 1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	baseline := filepath.Join(dir, "baseline.yaml")
	flags := []string{"--target", "v1.37", "--prometheus-url", prom, "--promql-checks", checks}
	g, _, r := preflight(t, cp, "promql", append(flags, "--save", baseline)...)
	if g.Status != "ok" || !evidenceHas(g, "ttft-p99: 0.2 recorded as the baseline") || !evidenceHas(g, "PASS apiserver-lists: now ", "at least 1") {
		t.Fatalf("clean: want PASS with the baseline recorded, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}

	ttft.Store("0.5")
	plugintest.WaitQuery(t, prom, `max(e2e_ttft_p99_seconds)`, 0.5)
	v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline)
	if v.ExitCode != 1 || !strings.Contains(v.Stdout, `"promql"`) ||
		!strings.Contains(v.Stdout, "ttft-p99: now 0.5, baseline 0.2, at most 0.3 (1.5 x baseline)") || strings.Contains(v.Stdout, "apiserver-lists") {
		t.Fatalf("ttft grew from 0.2 to 0.5 with maxRatio 1.5: want exit 1 and one promql FAIL naming baseline and now\n%s", v)
	}
	if !strings.Contains(v.Stdout, "/api/v1/query") {
		t.Errorf("the regression does not carry the query as a command\n%s", v)
	}

	if err := os.WriteFile(checks, []byte(`- name: absent
  expr: sum(vllm:time_to_first_token_seconds_count{job="exporter"})
  max: 10
`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, _, r = preflight(t, cp, "promql", flags...)
	if g.Status != "unknown" || !evidenceHas(g, "UNKNOWN absent: no sample") {
		t.Fatalf("no series: want UNKNOWN naming no sample, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}

	// README's example checks are expressions this Prometheus accepts, and
	// those on the apiserver's metrics select series of the real apiserver.
	b, err := os.ReadFile("../../pkg/health/testdata/promql-checks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := health.ParsePromQLChecks(b)
	if err != nil {
		t.Fatal(err)
	}
	// A rate over the apiserver's counters needs two of its scrapes in the
	// window; on a loaded machine a scrape can miss its 2s timeout, so one
	// good scrape (waited for above) is not yet two (a full run here saw
	// both apiserver checks select nothing 8s in).
	plugintest.WaitQueryAtLeast(t, prom, `sum_over_time(up{job="apiserver"}[5m])`, 2)
	for _, res := range health.ReadPromQL(ctxT(t), health.PrometheusAccess{URL: prom}, examples) {
		if strings.Contains(res.Unread, "rejected") || strings.Contains(res.Unread, "Prometheus at") {
			t.Errorf("README check %s: %s", res.Name, res.Unread)
		}
		if strings.HasPrefix(res.Name, "apiserver-") && strings.Contains(res.Unread, "no sample") {
			t.Errorf("README check %s selects no series of the apiserver: %s", res.Name, res.Expr)
		}
	}
}
