//go:build e2e

package skewe2e

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// postAlert posts an alert for cluster e2e, active for an hour.
func postAlert(t *testing.T, base, name string, labels map[string]string) {
	t.Helper()
	l := map[string]string{"alertname": name, "cluster": "e2e"}
	for k, v := range labels {
		l[k] = v
	}
	plugintest.PostAlert(t, base, l, time.Now().Add(time.Hour))
}

// The alerts gate against a real Alertmanager with alerts posted to it:
// clean it passes; a critical alert fails it, naming the alert; an alert
// the matchers leave out, a silenced one and an inhibited one do not
// count; `kubectl skew verify` against the clean baseline reports the new
// alert as a regression; a matcher Alertmanager rejects is UNKNOWN.
func TestAlertsGate(t *testing.T) {
	cp := scenario(t)
	am := plugintest.StartAlertmanager(t)
	dir := t.TempDir()
	baseline := filepath.Join(dir, "baseline.yaml")
	flags := []string{"--target", "v1.37", "--alertmanager-url", am, "--alert-matcher", `severity="critical"`, "--alert-matcher", `cluster=~"e2e|prod"`}
	g, _, r := preflight(t, cp, "alerts", append(flags, "--save", baseline)...)
	if g.Status != "ok" || !strings.Contains(g.Message, `matching severity="critical"`) {
		t.Fatalf("no alert: %s %q\n%s", g.Status, g.Message, r)
	}
	// kube-prometheus-stack's Watchdog fires all the time by design: left
	// out unless --all-alerts, even with no matcher.
	postAlert(t, am, "Watchdog", map[string]string{"severity": "none"})
	g, _, r = preflight(t, cp, "alerts", "--target", "v1.37", "--alertmanager-url", am)
	if g.Status != "ok" || !strings.Contains(g.Message, `alertname!~"Watchdog|InfoInhibitor"`) {
		t.Fatalf("Watchdog firing, no matcher: want PASS, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	g, _, r = preflight(t, cp, "alerts", "--target", "v1.37", "--alertmanager-url", am, "--all-alerts")
	if g.Status != "fail" || len(g.Evidence) != 1 || !evidenceHas(g, "Watchdog{") {
		t.Fatalf("Watchdog firing, --all-alerts: want FAIL on Watchdog, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}

	postAlert(t, am, "NodeDown", map[string]string{"severity": "critical"})
	postAlert(t, am, "DiskFilling", map[string]string{"severity": "warning"})
	postAlert(t, am, "SilencedCritical", map[string]string{"severity": "critical"})
	postAlert(t, am, "Maintenance", map[string]string{"severity": "none"})
	postAlert(t, am, "InhibitedCritical", map[string]string{"severity": "critical"})
	plugintest.AlertmanagerPost(t, am, "/silences", map[string]any{"matchers": []map[string]any{{"name": "alertname", "value": "SilencedCritical", "isRegex": false, "isEqual": true}},
		"startsAt": time.Now().Add(-time.Minute), "endsAt": time.Now().Add(time.Hour), "createdBy": "e2e", "comment": "silenced by the test"})
	// The inhibitor learns of Maintenance asynchronously: wait until
	// Alertmanager itself reports InhibitedCritical as inhibited.
	if err := harness.Eventually(ctxT(t), "InhibitedCritical inhibited", 30*time.Second, func(context.Context) (bool, error) {
		resp, err := http.Get(am + `/api/v2/alerts?filter=alertname%3D%22InhibitedCritical%22`)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var as []struct {
			Status struct {
				InhibitedBy []string `json:"inhibitedBy"`
			} `json:"status"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&as); err != nil {
			return false, nil
		}
		return len(as) == 1 && len(as[0].Status.InhibitedBy) > 0, nil
	}); err != nil {
		t.Fatal(err)
	}

	g, _, r = preflight(t, cp, "alerts", flags...)
	if g.Status != "fail" || len(g.Evidence) != 1 || !evidenceHas(g, "NodeDown{", `severity="critical"`, "NodeDown from the test") {
		t.Fatalf("one critical alert, one warning, one silenced, one inhibited: want FAIL on NodeDown alone, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	if !strings.Contains(g.Command, "/api/v2/alerts") {
		t.Errorf("command %q does not show the request", g.Command)
	}

	// verify reads Alertmanager the way the baseline did.
	v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline)
	if v.ExitCode != 1 || !strings.Contains(v.Stdout, `"alert"`) || !strings.Contains(v.Stdout, "NodeDown") ||
		strings.Contains(v.Stdout, "SilencedCritical") || strings.Contains(v.Stdout, "InhibitedCritical") || strings.Contains(v.Stdout, "DiskFilling") {
		t.Fatalf("verify with NodeDown firing: want exit 1 and one alert regression, NodeDown\n%s", v)
	}

	g, _, r = preflight(t, cp, "alerts", "--target", "v1.37", "--alertmanager-url", am, "--alert-matcher", `severity=~"(`)
	if g.Status != "unknown" || !strings.Contains(g.Message, "rejected the query") {
		t.Fatalf("bad matcher: want UNKNOWN naming the rejection, got %s %q\n%s", g.Status, g.Message, r)
	}
}
