package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// alertmanagerConfig routes every alert to a receiver that sends nothing
// and inhibits InhibitedCritical while Maintenance fires for its cluster
// (https://prometheus.io/docs/alerting/0.28/configuration/#inhibit_rule).
const alertmanagerConfig = `route:
  receiver: blackhole
receivers:
- name: blackhole
inhibit_rules:
- source_matchers: ['alertname="Maintenance"']
  target_matchers: ['alertname="InhibitedCritical"']
  equal: [cluster]
`

// StartAlertmanager runs the real Alertmanager, built from the module
// proxy by e2e/tools/build.sh alertmanager, on a free loopback port, alone
// (no cluster gossip), and returns its base URL.
func StartAlertmanager(t *testing.T) string {
	t.Helper()
	bin := ToolBinary(t, "alertmanager", "ALERTMANAGER_VERSION")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(alertmanagerConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return StartServer(t, "Alertmanager", bin, "/-/ready", func(addr string) []string {
		return []string{"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr, "--cluster.listen-address="}
	})
}

// AlertmanagerPost posts v as JSON to Alertmanager's API v2.
func AlertmanagerPost(t *testing.T, base, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(base+"/api/v2"+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
}

// PostAlert posts one alert with these labels (alertname among them),
// started a minute ago and active until endsAt; an endsAt now or past
// resolves an alert posted earlier with the same labels (API v2
// postableAlert, alertmanager@v0.35.0 api/v2/openapi.yaml).
func PostAlert(t *testing.T, base string, labels map[string]string, endsAt time.Time) {
	t.Helper()
	AlertmanagerPost(t, base, "/alerts", []map[string]any{{"labels": labels, "annotations": map[string]string{"summary": labels["alertname"] + " from the test"},
		"startsAt": time.Now().Add(-time.Minute), "endsAt": endsAt}})
}

// StartPrometheus runs the real Prometheus, built from the module proxy
// by e2e/tools/build.sh prometheus, on a free loopback port, scraping the
// control plane's apiserver (/metrics, with the admin client certificate)
// every 2 s and the exporter at exporter every second, and returns its
// base URL.
func StartPrometheus(t *testing.T, cp *harness.ControlPlane, exporter string) string {
	t.Helper()
	bin := ToolBinary(t, "prometheus", "PROMETHEUS_VERSION")
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, cert, key := write("ca.crt", cp.Config.CAData), write("client.crt", cp.Config.CertData), write("client.key", cp.Config.KeyData)
	api, err := url.Parse(cp.Host)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := url.Parse(exporter)
	if err != nil {
		t.Fatal(err)
	}
	// prometheus@v0.315.1 docs/configuration/configuration.md:
	// scrape_config, static_config and tls_config.
	cfg := write("prometheus.yml", []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
- job_name: apiserver
  scrape_interval: 2s
  scheme: https
  tls_config: {ca_file: %q, cert_file: %q, key_file: %q}
  static_configs: [{targets: [%q]}]
- job_name: exporter
  static_configs: [{targets: [%q]}]
`, ca, cert, key, api.Host, exp.Host)))
	return StartServer(t, "Prometheus", bin, "/-/ready", func(addr string) []string {
		return []string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr}
	})
}

// WaitQuery polls Prometheus until expr evaluates to want.
func WaitQuery(t *testing.T, prom, expr string, want float64) {
	t.Helper()
	waitValue(t, prom, expr, " = ", want, func(v float64) bool { return math.Abs(v-want) < 1e-9 })
}

// WaitQueryAtLeast polls Prometheus until expr evaluates to min or more.
func WaitQueryAtLeast(t *testing.T, prom, expr string, min float64) {
	t.Helper()
	waitValue(t, prom, expr, " >= ", min, func(v float64) bool { return v >= min })
}

func waitValue(t *testing.T, prom, expr, op string, want float64, ok func(float64) bool) {
	t.Helper()
	var last string
	if err := harness.Eventually(context.Background(), expr+op+health.FormatValue(want), time.Minute, func(ctx context.Context) (bool, error) {
		v, err := health.QueryOne(ctx, health.PrometheusAccess{URL: prom}, expr)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = health.FormatValue(v)
		return ok(v), nil
	}); err != nil {
		t.Fatalf("%v (last: %s)", err, last)
	}
}
