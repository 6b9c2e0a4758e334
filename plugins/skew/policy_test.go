package skew

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
)

// A probe file that does not exist is refused (exit 3, one line naming
// the flag and the file, nothing on stdout); one that does not parse is a
// line in the admission-probes gate, and every other gate still runs.
func TestPreflightBadProbeFiles(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := run(t, getter(readyCluster(t)), "", "preflight", "--target", "v1.37", "-o", "json", "--probe-file", bad, "--probe-file", "/nonexistent.yaml")
	if missing.Code != cli.ExitUnavailable || missing.Out != "" || missing.Err != "error: --probe-file /nonexistent.yaml: does not exist\n" {
		t.Errorf("a probe file that does not exist: exit %d, stdout %q, stderr %q", missing.Code, missing.Out, missing.Err)
	}
	r := run(t, getter(readyCluster(t)), "", "preflight", "--target", "v1.37", "-o", "json", "--probe-file", bad)
	if r.Code != cli.ExitOK {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	var rep PreflightReport
	if err := yaml.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != len(preflight.GateOrder) {
		t.Errorf("%d gates, want %d", len(rep.Items), len(preflight.GateOrder))
	}
	for _, g := range rep.Items {
		if g.Name != preflight.GateAdmission {
			continue
		}
		var lines []string
		for _, e := range g.Evidence {
			if strings.Contains(e, "probe file") {
				lines = append(lines, e)
			}
		}
		if g.Status != preflight.StatusUnknown || len(lines) != 1 || !strings.Contains(lines[0], "bad.yaml: document 1:") {
			t.Errorf("admission-probes: %s %s\n%s", g.Status, g.Message, strings.Join(g.Evidence, "\n"))
		}
	}
}

func TestPreflightCertThresholds(t *testing.T) {
	r := run(t, &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}, "", "preflight", "--target", "v1.37", "--cert-warn-days", "5", "--cert-fail-days", "10")
	if r.Code != cli.ExitUsage || !strings.Contains(r.Err, "--cert-warn-days 5 and --cert-fail-days 10") {
		t.Errorf("exit %d\n%s", r.Code, r.Err)
	}
}

// New RBAC grants after the baseline: a plain one is a WARN (listed, exit
// 0), secrets access a FAIL (exit 1) unless --allow-grant names it.
func TestVerifyRBACGrants(t *testing.T) {
	c := readyCluster(t)
	path := filepath.Join(t.TempDir(), "before.yaml")
	if r := run(t, getter(c), "", "preflight", "--target", "v1.37", "--save", path, "-q"); r.Code != 0 {
		t.Fatalf("preflight --save: exit %d\n%s", r.Code, r.Err)
	}
	mk := func(name string, rules ...rbacv1.PolicyRule) {
		if _, err := c.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: name}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "dana"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("pod-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}})
	w := run(t, getter(c), "", "verify", "--baseline", path, "--color", "never")
	if w.Code != cli.ExitOK || !strings.Contains(w.Out, "WARN") || !strings.Contains(w.Out, "User dana newly granted [pods: get]") || !strings.Contains(w.Out, "0 regressions against the baseline of ") || !strings.Contains(w.Out, "; 1 warning\n") {
		t.Errorf("a plain new grant: exit %d\n%s%s", w.Code, w.Out, w.Err)
	}
	mk("secret-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	f := run(t, getter(c), "", "verify", "--baseline", path, "-o", "json")
	var rep VerifyReport
	if err := yaml.Unmarshal([]byte(f.Out), &rep); err != nil {
		t.Fatal(err)
	}
	if f.Code != cli.ExitFindings || rep.Summary.Regressions != 1 || rep.Summary.Warnings != 1 {
		t.Errorf("secrets access: exit %d %+v\n%s", f.Code, rep.Summary, f.Out)
	}
	if a := run(t, getter(c), "", "verify", "--baseline", path, "--allow-grant", "dana", "-o", "wide"); a.Code != cli.ExitOK || !strings.Contains(a.Out, "allowed by --allow-grant dana") {
		t.Errorf("--allow-grant: exit %d\n%s", a.Code, a.Out)
	}
}
