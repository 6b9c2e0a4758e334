package preflight

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

func TestPatchGate(t *testing.T) {
	patches, err := skew.ParsePatches([]byte(`{"dataDate": "2026-12-01", "source": "test rows. more", "minors": [
		{"minor": "1.30", "version": "1.30.14", "released": "2025-06-17", "final": true},
		{"minor": "1.36", "version": "1.36.5", "released": "2026-10-01", "asOf": "2026-11-20"},
		{"minor": "1.37", "version": "1.37.3", "released": "2026-11-20"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cal := skew.DefaultCalendar().WithPatches(patches)
	day := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		server string
		max    int
		want   Status
		msg    string
	}{
		// The data knows 1.36.5 as the newest as of 2026-11-20: a newer
		// patch would be at most 11 days old.
		{"v1.36.5", 0, StatusPass, "at most 11 days old, within the 30-day patch SLO"},
		{"v1.36.5", 10, StatusUnknown, "a newer one may have come out since"},
		{"v1.36.2", 0, StatusWarn, "past the 30-day patch SLO"},
		// At least 61 days (1.36.3 is not in the data): within 90 proves nothing.
		{"v1.36.2", 90, StatusUnknown, "at least 61 days"},
		{"v1.37.2", 0, StatusPass, "11 days and 1 patch release behind v1.37.3"},
		// Out of support is what the upgrade fixes: a warning, not a block.
		{"v1.30.14", 0, StatusWarn, "1.30 is out of support"},
		{"v1.99.0", 0, StatusUnknown, "does not list 1.99"},
		{"v1.37.3", 0, StatusPass, "on the newest patch release"},
		// Two patches behind, the newest out 11 days: at least 11 days, so
		// the SLO cannot be judged.
		{"v1.37.1", 0, StatusUnknown, "at least 11 days"},
	} {
		kc := fake.NewClientset()
		kc.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: tc.server}
		r := &Runner{Kube: kc, Calendar: cal, Now: func() time.Time { return day }, Policy: PolicyOptions{PatchMaxDays: tc.max}}
		g, f := r.patchGate(context.Background())
		if g.Status != tc.want || !strings.Contains(g.Message, tc.msg) || f == nil || !strings.Contains(strings.Join(g.Evidence, "\n"), "patch data of 2026-12-01 (test rows;") {
			t.Errorf("%s: %s %s %v", tc.server, g.Status, g.Message, g.Evidence)
		}
	}
	// EKS keeps patching 1.33 in extended support after its upstream end of
	// life: the gate judges the provider's window, as the skew summary does.
	eks := skew.Inventory{Server: skew.ServerVersion{GitVersion: "v1.33.5-eks-113cf36"}}
	kc := fake.NewClientset()
	kc.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.33.5-eks-113cf36"}
	r := &Runner{Kube: kc, Calendar: skew.DefaultCalendar(), Now: func() time.Time { return day }, Target: skew.Version{Major: 1, Minor: 34},
		inventory: func() *skew.Inventory { return &eks }}
	if up := skew.DefaultCalendar().Support(skew.Version{Major: 1, Minor: 33}, day); up.Status != skew.StatusViolation {
		t.Fatalf("the case needs 1.33 past its upstream end of life on %s: %s", day, up.Message)
	}
	g, f := r.patchGate(context.Background())
	if f == nil || f.Provider != "eks" || f.Window != skew.WindowExtended || f.Support == skew.StatusViolation || strings.Contains(g.Message, "out of support") {
		t.Errorf("EKS 1.33 in extended support: %s %s %+v", g.Status, g.Message, f)
	}
	r.inventory = func() *skew.Inventory { return nil }
	if g, _ := r.patchGate(context.Background()); g.Status != StatusWarn || !strings.Contains(g.Message, "out of support") || g.Command != "kubectl skew plan --target v1.34" {
		t.Errorf("1.33 upstream: %s %s %q", g.Status, g.Message, g.Command)
	}
	behind := &PatchFact{Version: "v1.36.2", MaxDays: 30, Lag: skew.PatchLag{Status: skew.StatusInfo, DaysBehind: 40}}
	fresh := &PatchFact{Version: "v1.37.1", MaxDays: 30, Lag: skew.PatchLag{Status: skew.StatusInfo, DaysBehind: 3}}
	if regs := verifyPatch(&PolicyEvidence{Patch: fresh}, &PolicyEvidence{Patch: behind}, "1.37"); len(regs) != 1 || regs[0].Status != StatusWarn {
		t.Errorf("%+v", regs)
	}
	// Out of support now: a warning whose command is the plan to the
	// baseline's target.
	outOf := &PatchFact{Version: "v1.33.5", MaxDays: 30, Support: skew.StatusViolation, Lag: skew.PatchLag{Status: skew.StatusInfo}}
	if regs := verifyPatch(&PolicyEvidence{Patch: fresh}, &PolicyEvidence{Patch: outOf}, "1.34"); len(regs) != 1 || regs[0].Status != StatusWarn || regs[0].Command != "kubectl skew plan --target v1.34" {
		t.Errorf("out of support: %+v", regs)
	}
	if regs := verifyPatch(&PolicyEvidence{Patch: behind}, &PolicyEvidence{Patch: behind}, "1.37"); len(regs) != 0 {
		t.Errorf("already behind at the baseline: %+v", regs)
	}
}
