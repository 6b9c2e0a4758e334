package health

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// alertmanager-v0.35.0-alerts.json is GET /api/v2/alerts (every alert:
// silenced and inhibited ones too) from a real Alertmanager v0.35.0 with
// the alerts and the silence e2e/skew TestAlertsGate posts: NodeDown
// (critical), DiskFilling (warning), SilencedCritical under a silence,
// InhibitedCritical inhibited by Maintenance.
func TestReadAlertsRecorded(t *testing.T) {
	body, err := os.ReadFile("testdata/alertmanager-v0.35.0-alerts.json")
	if err != nil {
		t.Fatal(err)
	}
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	got, err := ReadAlerts(context.Background(), AlertmanagerAccess{URL: srv.URL + "/", Matchers: []string{`cluster="e2e"`}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"active=true", "silenced=false", "inhibited=false", "filter=cluster%3D%22e2e%22", "filter=alertname%21~%22Watchdog%7CInfoInhibitor%22"} {
		if !strings.Contains(query, q) {
			t.Errorf("query %q lacks %s", query, q)
		}
	}
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	// The silenced and the inhibited alert are dropped even where
	// Alertmanager returns them.
	if strings.Join(names, ",") != "DiskFilling,Maintenance,NodeDown" {
		t.Fatalf("alerts %q, want DiskFilling, Maintenance, NodeDown", names)
	}
	for _, a := range got {
		if a.Fingerprint == "" || a.StartsAt.IsZero() || a.Labels["cluster"] != "e2e" {
			t.Errorf("alert %+v lacks its fingerprint, start or labels", a)
		}
	}
	if s := got[2].String(); !strings.HasPrefix(s, `NodeDown{cluster="e2e",severity="critical"} firing since `) || !strings.HasSuffix(s, ": NodeDown from the test") {
		t.Errorf("String() = %q", s)
	}
}

func TestAlertsQueryAllAlerts(t *testing.T) {
	if q := (AlertmanagerAccess{AllAlerts: true}).AlertsQuery(); strings.Contains(q, "filter") {
		t.Errorf("AllAlerts: query %q has a filter", q)
	}
}

func TestReadAlertsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `"bad matcher format: severity=~\"(\""`, http.StatusBadRequest)
	}))
	defer srv.Close()
	if _, err := ReadAlerts(context.Background(), AlertmanagerAccess{URL: srv.URL, Matchers: []string{`severity=~"("`}}); err == nil || !strings.Contains(err.Error(), "rejected the query") {
		t.Errorf("400: err %v", err)
	}
	for _, u := range []string{"", "alertmanager:9093", "ftp://am"} {
		if _, err := ReadAlerts(context.Background(), AlertmanagerAccess{URL: u}); err == nil {
			t.Errorf("URL %q: no error", u)
		}
	}
}
