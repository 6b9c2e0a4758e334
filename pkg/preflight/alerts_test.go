package preflight

import (
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

func TestVerifyAlerts(t *testing.T) {
	am := &health.AlertmanagerAccess{URL: "http://am:9093", Matchers: []string{`severity="critical"`}}
	old := health.Alert{Fingerprint: "aa", Name: "KubeletDown", Labels: map[string]string{"alertname": "KubeletDown"}}
	fresh := health.Alert{Fingerprint: "bb", Name: "NodeDown", Labels: map[string]string{"alertname": "NodeDown"}}
	base := Evidence{Health: &HealthEvidence{Alertmanager: am, Alerts: []health.Alert{old}}}
	now := Evidence{Health: &HealthEvidence{Alertmanager: am, Alerts: []health.Alert{old, fresh}}}
	regs := verifyHealth(base, now)
	if len(regs) != 1 || regs[0].Kind != RegAlert || regs[0].Object != "NodeDown" ||
		!strings.Contains(regs[0].Command, `--data-urlencode 'filter=severity="critical"'`) {
		t.Fatalf("regressions %+v, want NodeDown alone", regs)
	}
	// Read at the baseline, unreadable now: UNKNOWN, not a pass.
	now = Evidence{Health: &HealthEvidence{Alertmanager: am, Unread: map[string]string{GateAlerts: "connection refused"}}}
	regs = verifyHealth(base, now)
	if len(regs) != 1 || regs[0].Kind != RegHealthUnread || regs[0].Status != StatusUnknown {
		t.Fatalf("unreadable now: %+v", regs)
	}
}
