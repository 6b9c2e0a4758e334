package preflight

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

func TestVerifyProbeApp(t *testing.T) {
	ev := func(verdict string) *HealthEvidence {
		if verdict == "" {
			return &HealthEvidence{}
		}
		return &HealthEvidence{ProbeApp: &health.ProbeAppResult{Verdict: verdict, Message: verdict + " now", Node: "n1"},
			ProbeAppOptions: &health.ProbeAppOptions{Namespace: "probes"}}
	}
	for _, tc := range []struct {
		base, now string
		want      Status
	}{
		{health.ProbeAppPass, health.ProbeAppPass, ""},
		{health.ProbeAppPass, health.ProbeAppFail, StatusFail},
		{health.ProbeAppFail, health.ProbeAppFail, StatusFail},
		{"", health.ProbeAppFail, StatusFail},
		{health.ProbeAppPass, health.ProbeAppUnknown, StatusUnknown},
		{"", health.ProbeAppUnknown, StatusUnknown},
		{health.ProbeAppUnknown, health.ProbeAppUnknown, ""},
		{"", health.ProbeAppDryRun, StatusWarn},
	} {
		regs := verifyHealth(Evidence{Health: ev(tc.base)}, Evidence{Health: ev(tc.now)})
		switch {
		case tc.want == "" && len(regs) != 0:
			t.Errorf("baseline %q, now %q: want nothing, got %+v", tc.base, tc.now, regs)
		case tc.want != "" && (len(regs) != 1 || regs[0].Status != tc.want || regs[0].Kind != RegProbeApp || regs[0].Object != "node/n1" ||
			regs[0].Command != "kubectl -n probes get pods,services -l "+health.ProbeAppLabel+" -o wide"):
			t.Errorf("baseline %q, now %q: want one %s, got %+v", tc.base, tc.now, tc.want, regs)
		}
	}
	left := ev(health.ProbeAppPass)
	left.ProbeApp.LeftBehind = []string{"pod and service probes/x: timeout"}
	regs := verifyHealth(Evidence{}, Evidence{Health: left})
	if len(regs) != 1 || regs[0].Status != StatusWarn || regs[0].Command != "kubectl -n probes delete pods,services -l "+health.ProbeAppLabel {
		t.Errorf("left behind: %+v", regs)
	}
}
