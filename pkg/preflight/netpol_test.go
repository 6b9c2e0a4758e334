package preflight

import (
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

func TestVerifyNetworkPolicy(t *testing.T) {
	base := &NetworkPolicyEvidence{
		Kinds: []string{"NetworkPolicy", "CiliumNetworkPolicy"},
		Policies: []health.PolicyFact{{Kind: "NetworkPolicy", Namespace: "ml", Name: "deny-all", Digest: "1"},
			{Kind: "CiliumNetworkPolicy", Namespace: "ml", Name: "l7", Digest: "2"},
			{Kind: "NetworkPolicy", Namespace: "ml", Name: "allow-dns", Digest: "3"}},
		CNIs: []health.CNIFact{{CNI: "Cilium", Namespace: "kube-system", Name: "cilium", Desired: 2, Ready: 2}},
	}
	now := &NetworkPolicyEvidence{
		Kinds:  []string{"NetworkPolicy", "GlobalNetworkPolicy"},
		Unread: map[string]string{"CiliumNetworkPolicy": "forbidden: cannot list ciliumnetworkpolicies.cilium.io"},
		Policies: []health.PolicyFact{{Kind: "NetworkPolicy", Namespace: "ml", Name: "allow-dns", Digest: "3x"}, {Kind: "NetworkPolicy", Namespace: "ml", Name: "default-deny", Digest: "4"},
			{Kind: "GlobalNetworkPolicy", Name: "first-read-now", Digest: "5"}},
		CNIs: []health.CNIFact{{CNI: "Cilium", Namespace: "kube-system", Name: "cilium", Desired: 2, Ready: 0}},
	}
	regs := verifyHealth(Evidence{Health: &HealthEvidence{NetworkPolicy: base}}, Evidence{Health: &HealthEvidence{NetworkPolicy: now}})
	var got []string
	for _, r := range regs {
		got = append(got, string(r.Status)+" "+r.Object+": "+r.Message)
	}
	want := []string{
		"UNKNOWN CiliumNetworkPolicy: CiliumNetworkPolicy was read at the baseline and not now: forbidden: cannot list ciliumnetworkpolicies.cilium.io",
		"FAIL NetworkPolicy ml/allow-dns: NetworkPolicy ml/allow-dns changed since the baseline (spec differs)",
		"FAIL NetworkPolicy ml/deny-all: NetworkPolicy ml/deny-all is gone since the baseline",
		"WARN NetworkPolicy ml/default-deny: NetworkPolicy ml/default-deny is new since the baseline",
		"FAIL cni: Cilium DaemonSet kube-system/cilium: 0 of 2 pods ready (all were ready at the baseline): policy is not enforced on nodes without a ready agent",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if regs := verifyHealth(Evidence{Health: &HealthEvidence{NetworkPolicy: base}}, Evidence{Health: &HealthEvidence{NetworkPolicy: base}}); len(regs) != 0 {
		t.Errorf("unchanged: %+v", regs)
	}
}
