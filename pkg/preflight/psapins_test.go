package preflight

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

func TestPodSecurityPinsGate(t *testing.T) {
	kc := fake.NewClientset(
		ns("old", map[string]string{psaapi.EnforceLevelLabel: "baseline", psaapi.EnforceVersionLabel: "v1.33"}),
		ns("recent", map[string]string{psaapi.EnforceLevelLabel: "restricted", psaapi.EnforceVersionLabel: "v1.36"}),
		ns("floating", map[string]string{psaapi.EnforceLevelLabel: "restricted"}),
		ns("plain", nil))
	g, pins := (&Runner{Kube: kc, Target: mustVersion("v1.37")}).podSecurityPinsGate(context.Background())
	ev := strings.Join(g.Evidence, "\n")
	// The checks Pod Security added to baseline after 1.33, up to 1.37.
	if g.Status != StatusWarn || len(pins) != 3 || !strings.Contains(ev, "namespace old: enforce=baseline pinned to v1.33, 4 minors behind 1.37") ||
		!strings.Contains(ev, "hostProbesAndHostLifecycle (baseline, v1.34)") || strings.Contains(ev, "restricted, v1.35") || strings.Contains(ev, "recent") ||
		g.Command != "kubectl label --dry-run=server --overwrite ns old pod-security.kubernetes.io/enforce-version=v1.37" {
		t.Errorf("%s %s %q\n%s", g.Status, g.Message, g.Command, ev)
	}
}

func TestVerifyPodSecurityPins(t *testing.T) {
	ev := func(server string, pins ...NamespacePodSecurity) Evidence {
		return Evidence{Inventory: skew.Inventory{Server: skew.ServerVersion{GitVersion: server}}, Policy: &PolicyEvidence{PodSecurity: pins}}
	}
	pins := []NamespacePodSecurity{{Namespace: "a", Enforce: "restricted", EnforceVersion: "v1.35"}, {Namespace: "b", Enforce: "baseline", EnforceVersion: "v1.33"},
		{Namespace: "c", Enforce: "restricted", EnforceVersion: "latest"}}
	regs := verifyPodSecurityPins(ev("v1.36.2", pins...), ev("v1.37.1", pins...))
	// a was one minor behind 1.36 and is two behind 1.37; b was behind already.
	if len(regs) != 1 || regs[0].Object != "namespace/a" || regs[0].Kind != RegPodSecurityPin || regs[0].Status != StatusWarn || !strings.Contains(regs[0].Message, "2 minors behind 1.37") {
		t.Errorf("%+v", regs)
	}
}
