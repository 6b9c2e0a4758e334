package skew

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// TestSkewRoleListsPolicyKinds: every network policy kind the
// network-policy gate lists (pkg/health PolicyKinds) is allowed to the
// shipped gpufleet-skew ClusterRole, by a rule that lists exactly kinds the
// gate reads, and README's RBAC line for the gate names its resource.
// e2e/rbac TestSkewRole removes each rule and sees the kind's UNKNOWN.
func TestSkewRoleListsPolicyKinds(t *testing.T) {
	docs := deployDocs(t, "rbac/skew.yaml")
	var cr rbacv1.ClusterRole
	decodeStrict(t, "rbac/skew.yaml", docs[0], &cr)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, gate, _ := strings.Cut(string(readme), "- **network-policy**")
	gate, _, _ = strings.Cut(gate, "\n- **")
	_, rbac, _ := strings.Cut(gate, "RBAC:")
	read := map[string]bool{}
	for _, k := range health.PolicyKinds {
		read[k.GVR.Group+"/"+k.GVR.Resource] = true
	}
	for _, k := range health.PolicyKinds {
		allowed := slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Verbs, "list") && slices.Contains(r.APIGroups, k.GVR.Group) && slices.Contains(r.Resources, k.GVR.Resource)
		})
		if !allowed {
			t.Errorf("deploy/rbac/skew.yaml: no rule lists %s.%s, which the network-policy gate reads", k.GVR.Resource, k.GVR.Group)
		}
		if !strings.Contains(rbac, "`"+k.GVR.Resource+"`") && !strings.Contains(rbac, k.GVR.Resource) {
			t.Errorf("README network-policy RBAC does not name %s", k.GVR.Resource)
		}
	}
	for _, r := range cr.Rules {
		for _, g := range r.APIGroups {
			if g != "cilium.io" && g != "crd.projectcalico.org" && g != "projectcalico.org" {
				continue
			}
			for _, res := range r.Resources {
				if !read[g+"/"+res] {
					t.Errorf("deploy/rbac/skew.yaml grants %s.%s, which no gate reads", res, g)
				}
			}
		}
	}
	if !strings.Contains(rbac, "gpufleet-skew") {
		t.Errorf("README network-policy RBAC does not say the role: %q", rbac)
	}
}
