package preflight

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// The probe's verdict in verify: FAIL is a FAIL, UNKNOWN an UNKNOWN (also
// when the baseline could not prove anything either: it was asked for),
// a dry run a WARN, a leftover a WARN.
func TestVerifyNetworkProbe(t *testing.T) {
	base := &NetworkPolicyEvidence{Kinds: []string{"NetworkPolicy"}}
	for _, c := range []struct {
		res  health.NetworkProbeResult
		want []Status
	}{
		{health.NetworkProbeResult{Verdict: health.ProbeAppPass, Message: "the deny denies"}, nil},
		{health.NetworkProbeResult{Verdict: health.ProbeAppFail, Namespace: "gpufleet-netprobe-ab12c", Message: "does not deny"}, []Status{StatusFail}},
		{health.NetworkProbeResult{Verdict: health.ProbeAppUnknown, Message: "all 2 nodes are KWOK fake nodes"}, []Status{StatusUnknown}},
		{health.NetworkProbeResult{Verdict: health.ProbeAppDryRun, Message: "dry run"}, []Status{StatusWarn}},
		{health.NetworkProbeResult{Verdict: health.ProbeAppPass, LeftBehind: []string{"namespace x"}}, []Status{StatusWarn}},
	} {
		res := c.res
		now := &NetworkPolicyEvidence{Kinds: []string{"NetworkPolicy"}, Probe: &res}
		regs := verifyNetworkPolicy(base, now)
		if len(regs) != len(c.want) {
			t.Errorf("%s: %+v", res.Verdict, regs)
			continue
		}
		for i, r := range regs {
			if r.Status != c.want[i] || r.Kind != RegNetworkPolicy || !strings.HasPrefix(r.Message, "network probe") {
				t.Errorf("%s: %+v", res.Verdict, r)
			}
		}
	}
}

// On KWOK nodes a passing network-policy gate becomes UNKNOWN with the
// reason, not a pass.
func TestWithProbeKWOK(t *testing.T) {
	kube := fake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0", Annotations: map[string]string{health.KwokNodeAnnotation: "fake"}}})
	r := &Runner{Kube: kube}
	r.Health.ProbeNetwork = true
	ev := &NetworkPolicyEvidence{}
	g := r.withProbe(context.Background(), Gate{Status: StatusPass, Message: "2 network policies of NetworkPolicy recorded; enforced by cilium"}, ev)
	if g.Status != StatusUnknown || !strings.HasPrefix(g.Message, "network probe: no node can run the network probe's pods: all 1 nodes are KWOK fake nodes") ||
		ev.Probe == nil || ev.ProbeOptions == nil || g.Command != health.NetworkProbeCommand() {
		t.Errorf("%s %q %q %+v", g.Status, g.Message, g.Command, ev.Probe)
	}
}
