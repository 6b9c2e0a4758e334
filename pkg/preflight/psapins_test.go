package preflight

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

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
		!strings.Contains(ev, "not enforced there: hostProbesAndHostLifecycle (baseline, v1.34)\n") && !strings.HasSuffix(ev, "not enforced there: hostProbesAndHostLifecycle (baseline, v1.34)") ||
		strings.Contains(ev, "v1.35") || strings.Contains(ev, "sysctls") || strings.Contains(ev, "recent") ||
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

// Every revision of a Pod Security check after its first, from 1.24 on,
// is a relaxation (read in pod-security-admission v0.37.2 policy/: Windows
// pods exempted by spec.os in 1.25, sysctls added to the allowed list in
// 1.27, 1.29, 1.32 and 1.37, SELinux types allowed in 1.31, the
// user-namespace relaxations of procMount, runAsNonRoot and runAsUser in
// 1.35). A new revision fails this test until someone reads it and says
// whether it tightens (then checksSince must name it).
func TestPodSecurityRevisionsAreRelaxations(t *testing.T) {
	relaxations := map[string]bool{
		"allowPrivilegeEscalation 1.25": true, "capabilities_restricted 1.25": true, "seccompProfile_restricted 1.25": true,
		"sysctls 1.27": true, "sysctls 1.29": true, "sysctls 1.32": true, "sysctls 1.37": true, "seLinuxOptions 1.31": true,
		"procMount 1.35": true, "runAsNonRoot 1.35": true, "runAsUser 1.35": true,
	}
	seen := map[string]bool{}
	for _, c := range psapolicy.DefaultChecks() {
		for i, v := range c.Versions {
			if i == 0 || v.MinimumVersion.Minor() <= 23 {
				continue
			}
			k := fmt.Sprintf("%s %d.%d", c.ID, v.MinimumVersion.Major(), v.MinimumVersion.Minor())
			seen[k] = true
			if !relaxations[k] {
				t.Errorf("revision %s of Pod Security is not known to relax its check: read it and classify it", k)
			}
		}
	}
	for k := range relaxations {
		if !seen[k] {
			t.Errorf("known relaxation %s is not in pod-security-admission's checks", k)
		}
	}
	// Only hostProbesAndHostLifecycle (1.34) is new after 1.23.
	if got := checksSince(psaapi.LevelRestricted, skew.Version{Major: 1, Minor: 23}, skew.Version{Major: 1, Minor: 37}); len(got) != 1 || got[0] != "hostProbesAndHostLifecycle (baseline, v1.34)" {
		t.Errorf("checks new after 1.23: %v", got)
	}
}
