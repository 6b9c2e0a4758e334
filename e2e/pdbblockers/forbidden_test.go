//go:build e2e

package pdbblockerse2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/plugins/pdbblockers"
)

// TestPDBBlockersForbiddenNamespace runs the plugin as a user who may read
// pods and PDBs in one namespace only: the other namespaces are reported,
// the readable one is still checked, and the exit code says the read was
// partial.
func TestPDBBlockersForbiddenNamespace(t *testing.T) {
	e := newEnv(t, 1, 6*time.Minute)
	node := e.nodes[0]
	e.deploy("strict", 1, node, nil)
	e.pdb("strict", "strict", i(1), nil, "", 1)
	other := *e
	other.ns, other.apps = e.cp.Namespace(t), nil
	other.deploy("hidden", 1, node, nil)
	e.waitApps()
	other.waitApps()
	e.settle()

	user := "pdbb-e2e-" + e.ns
	rbac := e.cp.Client.RbacV1()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "namespaces"}, Verbs: []string{"get", "list"}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: e.ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "list"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects: crb.Subjects}
	for _, err := range []error{
		func() error { _, err := rbac.ClusterRoles().Create(e.ctx, cr, metav1.CreateOptions{}); return err }(),
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(e.ctx, crb, metav1.CreateOptions{})
			return err
		}(),
		func() error { _, err := rbac.Roles(e.ns).Create(e.ctx, role, metav1.CreateOptions{}); return err }(),
		func() error { _, err := rbac.RoleBindings(e.ns).Create(e.ctx, rb, metav1.CreateOptions{}); return err }(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
	})

	var rep pdbblockers.Report
	var res plugintest.Result
	// RBAC reaches the authorizer through informers: allow it a moment.
	err := harness.Eventually(e.ctx, "partial report", 30*time.Second, func(context.Context) (bool, error) {
		rep, res = e.report("--as", user, node)
		return res.ExitCode == 3 && len(rep.Items) > 0, nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	var forbidden []string
	for _, f := range rep.Forbidden {
		forbidden = append(forbidden, f.Namespace)
	}
	if !slices.Contains(forbidden, other.ns) || slices.Contains(forbidden, e.ns) {
		t.Errorf("forbidden namespaces %v: want %s in and %s out", forbidden, other.ns, e.ns)
	}
	if !strings.Contains(res.Stderr, "could not read namespace") || !strings.Contains(res.Stderr, "hint: kubectl auth can-i") {
		t.Errorf("stderr:\n%s", res.Stderr)
	}
	found := false
	for _, it := range rep.Items {
		if it.Namespace == e.ns && it.Verdict == eviction.OutcomeNever {
			found = true
		}
		if it.Namespace == other.ns {
			t.Errorf("pod %s of the forbidden namespace is in the report", it.Name)
		}
	}
	if !found {
		t.Errorf("the readable namespace's blocked pod is missing:\n%s", res.Stdout)
	}

	partial := plugintest.Run(t, bin, "--kubeconfig", e.cp.Kubeconfig, "--as", user, node, "-q", "--allow-partial")
	if partial.ExitCode != 1 {
		t.Errorf("--allow-partial: %s", partial)
	}
	// Without create on pods/eviction the dry run is reported, not fatal.
	rep, res = e.report("--as", user, "-n", e.ns, node, "--server-dry-run")
	if res.ExitCode != 1 || len(rep.Items) != 1 || rep.Items[0].DryRun == nil || rep.Items[0].DryRun.Result.Reason != eviction.ReasonForbidden {
		t.Errorf("dry run without permission:\n%s", res)
	}
}

// TestPDBBlockersUsage checks exit codes for bad input against a real server.
func TestPDBBlockersUsage(t *testing.T) {
	cp := harness.Shared(t)
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"no-such-node-pdbb"}, 2, "node not found: no-such-node-pdbb"},
		{[]string{}, 2, "no nodes given"},
		{[]string{"--all-nodes", "-o", "xml"}, 2, "unknown output format"},
		{[]string{"--all-nodes", "--context", "nope"}, 2, "error:"},
	} {
		r := plugintest.Run(t, bin, append([]string{"--kubeconfig", cp.Kubeconfig}, tc.args...)...)
		if r.ExitCode != tc.code || !strings.Contains(r.Stderr, tc.err) {
			t.Errorf("%v: %s", tc.args, r)
		}
	}
}
