//go:build e2e

package rbace2e

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// plantHelmReleases stores, through Helm's own storage drivers, release
// "web" in a Secret and release "api" in a ConfigMap, each one deployed
// revision with a policy/v1beta1 PodDisruptionBudget (removed in 1.25),
// after deleting every release record of ns.
func plantHelmReleases(t *testing.T, cp *harness.ControlPlane, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: "owner=helm"}
	if err := cp.Client.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]driver.Driver{
		"web": driver.NewSecrets(cp.Client.CoreV1().Secrets(ns)),
		"api": driver.NewConfigMaps(cp.Client.CoreV1().ConfigMaps(ns)),
	} {
		rel := &rspb.Release{Name: name, Namespace: ns, Version: 1, Info: &rspb.Info{Status: common.StatusDeployed},
			Manifest: "---\n# Source: app/templates/pdb.yaml\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: " + name + "\nspec:\n  minAvailable: 1\n"}
		if err := d.Create("sh.helm.release.v1."+name+".v1", rel); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeprecationsFixHelmRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	ns := cp.Namespace(t)
	plantHelmReleases(t, cp, ns)
	rs := loadRoles(t, "deprecations-fix-helm")
	const bin = "kubectl-deprecations"
	reset := func(t *testing.T) { plantHelmReleases(t, cp, ns) }
	flows := map[string]flow{
		"dry-run": {args: []string{"fix-helm", "-n", ns, "--dry-run", "--target-version", "v1.37"}, code: 0},
		"fix":     {args: []string{"fix-helm", "-n", ns, "--target-version", "v1.37"}, code: 0, after: reset},
	}
	user := grant(t, cp, "deprecations-fix-helm", "full", rs, ns, nil)
	checkFlows(t, cp, bin, user, []string{"dry-run", "fix"}, flows)
	checkRemovals(t, cp, "deprecations-fix-helm", bin, ns, rs, flows, []removal{
		{flow: "dry-run", code: 3, line: denied("list", "secrets")},
		{flow: "fix", code: 3, line: denied("create", "secrets")},
		// The new revision is written, the old one not superseded: the
		// run says so, and the release in the ConfigMap is still fixed.
		{flow: "fix", code: 3, line: denied("update", "secrets"), also: []string{"fixed"}},
		{flow: "dry-run", code: 3, line: denied("list", "configmaps")},
		{flow: "fix", code: 3, line: denied("create", "configmaps")},
		{flow: "fix", code: 3, line: denied("update", "configmaps"), also: []string{"fixed"}},
	})
}
