package fleetrun

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

func TestAlertsHaltCheck(t *testing.T) {
	recorded, err := os.ReadFile("../health/testdata/alertmanager-v0.35.0-alerts.json")
	if err != nil {
		t.Fatal(err)
	}
	var filters []string
	body := []byte("[]")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		filters = r.URL.Query()["filter"]
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	h := fleetfile.HaltCheck{Check: "alerts", AlertmanagerURL: srv.URL, Matchers: []string{`severity="critical"`}, ClusterLabel: "cluster"}
	checks := haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, nil)
	if len(checks) != 1 || checks[0].Result != CheckPass {
		t.Fatalf("no alert: %+v", checks)
	}
	if strings.Join(filters, " ") != `severity="critical" cluster="prod-usw2" alertname!~"Watchdog|InfoInhibitor"` {
		t.Errorf("filters %q, want the matchers, the cluster's and the always-firing alerts left out", filters)
	}
	all := h
	all.AllAlerts = true
	haltChecks(context.Background(), nil, []fleetfile.HaltCheck{all}, "prod-usw2", 0, 0, nil, nil)
	if strings.Join(filters, " ") != `severity="critical" cluster="prod-usw2"` {
		t.Errorf("allAlerts: filters %q, want the matchers and the cluster's only", filters)
	}
	body = recorded
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, nil)
	if checks[0].Result != CheckFail || !strings.Contains(checks[0].Message, "3 active alerts: DiskFilling{") {
		t.Errorf("alerts firing: %+v", checks[0])
	}
	srv.Close()
	checks = haltChecks(context.Background(), nil, []fleetfile.HaltCheck{h}, "prod-usw2", 0, 0, nil, nil)
	if checks[0].Result != CheckUnknown {
		t.Errorf("Alertmanager down: %+v", checks[0])
	}
}
