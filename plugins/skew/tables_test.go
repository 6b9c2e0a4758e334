package skew

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// wideHasAll fails unless -o wide has no shortened cell.
func wideHasAll(t *testing.T, wide string) {
	t.Helper()
	if strings.Contains(wide, cli.ElisionMark) {
		t.Errorf("-o wide shortened a value:\n%s", wide)
	}
}

// Every default table of skew fits 120 columns (golden asserts it for
// *.table) and -o wide keeps every value whole.
func TestTablesFit(t *testing.T) {
	offline := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	for _, tc := range []struct {
		name string
		cg   func() cli.ClientGetter
		args []string
	}{
		{"preflight", func() cli.ClientGetter { return getter(readyCluster(t)) }, []string{"preflight", "--target", "v1.37"}},
		{"compat", func() cli.ClientGetter { return offline }, []string{"compat"}},
		{"calendar", func() cli.ClientGetter { return offline }, []string{"calendar"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.cg(), "", append(tc.args, "--color", "never")...)
			golden(t, tc.name+".table", r.Out)
			w := run(t, tc.cg(), "", append(tc.args, "--color", "never", "-o", "wide")...)
			golden(t, tc.name+".wide", w.Out)
			wideHasAll(t, w.Out)
			if tc.name == "preflight" {
				j := run(t, tc.cg(), "", append(tc.args, "-o", "json")...)
				golden(t, tc.name+".json", goldenfile.Steady(j.Out, "collectedAt"))
			}
		})
	}
}

// verify after new grants: the table the on-call reads after a wave.
func TestVerifyTableFits(t *testing.T) {
	c := readyCluster(t)
	path := filepath.Join(t.TempDir(), "before.yaml")
	if r := run(t, getter(c), "", "preflight", "--target", "v1.37", "--save", path, "-q"); r.Code != 0 {
		t.Fatalf("preflight --save: exit %d\n%s", r.Code, r.Err)
	}
	for _, name := range []string{"gpu-operator-node-feature-discovery-worker", "training-operator-pytorchjob-launcher-secrets"} {
		if _, err := c.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: name}, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "llm-serve", Namespace: "inference"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, getter(c), "", "verify", "--baseline", path, "--color", "never")
	golden(t, "verify.table", strings.ReplaceAll(r.Out, path, "BASELINE"))
	w := run(t, getter(c), "", "verify", "--baseline", path, "--color", "never", "-o", "wide")
	golden(t, "verify.wide", strings.ReplaceAll(w.Out, path, "BASELINE"))
	j := run(t, getter(c), "", "verify", "--baseline", path, "-o", "json")
	golden(t, "verify.json", goldenfile.Steady(strings.ReplaceAll(j.Out, path, "BASELINE"), "collectedAt", "baseline"))
	wideHasAll(t, w.Out)
}

// demoFleet is the fleet fixture of pkg/fleetrun with one cluster named as
// long as a provider's (an EKS cluster ARN's name part).
func demoFleet(t *testing.T) (*fleetfile.Fleet, map[string]fleetrun.ClusterInfo) {
	t.Helper()
	f, err := fleetfile.LoadFile(filepath.Join("..", "..", "pkg", "fleetrun", "testdata", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Spec.Clusters {
		if f.Spec.Clusters[i].Name == "prod-use1" {
			f.Spec.Clusters[i].Name = "prod-use1-gpu-h100-training-east"
		}
	}
	one := 4
	in := map[string]fleetrun.ClusterInfo{}
	for _, c := range f.Spec.Clusters {
		inv := pkgskew.Inventory{Server: pkgskew.ServerVersion{GitVersion: "v1.37.2"}, Pools: []pkgskew.Pool{{Name: "h100-c", Label: "cloud.google.com/gke-nodepool", Nodes: 4,
			Versions: []pkgskew.VersionCount{{Version: "v1.34.6", Nodes: 4}}, GPUNodes: &one}}}
		in[c.Name] = fleetrun.ClusterInfo{Inventory: inv, GPUs: 64}
	}
	return f, in
}

func TestFleetPlanAndGateTablesFit(t *testing.T) {
	f, in := demoFleet(t)
	p, err := fleetrun.MakePlan(f, in, time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := printFleetPlan(&b, p, cli.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet-plan.table", b.String())
	b.Reset()
	if err := printFleetPlan(&b, p, cli.TableOptions{Wide: true}); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet-plan.wide", b.String())
	wideHasAll(t, b.String())

	approve := "kubectl skew fleet approve --run gpu-prod-20261102-0930 --ring prod --reason ..."
	g := &fleetrun.GateReport{Run: "gpu-prod-20261102-0930", Ring: "prod", Verdict: "halt", Checks: []fleetrun.Check{
		{Name: "halt", Cluster: "prod-use1-gpu-h100-training-east", Result: "fail", Message: "verify-regressions halted ring prod: 2 regressions on prod-use1-gpu-h100-training-east; lift it with `" + approve + "`"},
		{Name: "failure-budget", Result: "pass", Message: "0 failed in ring prod, budget 1"},
		{Name: "approval", Result: "wait", Message: "ring prod has 1 of 2 approvals (oncall-a): `" + approve + "`"},
		{Name: "nodes-not-ready", Cluster: "prod-euw1", Result: "pass", Message: "0 of 4 nodes not Ready (limit 10%)"},
	}}
	b.Reset()
	if err := printGateTable(&b, g, cli.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet-gate.table", b.String())
	if !strings.Contains(b.String(), "\n  "+approve+"\n") {
		t.Errorf("the approve command is not whole on its own line:\n%s", b.String())
	}
	b.Reset()
	if err := printGateTable(&b, g, cli.TableOptions{Wide: true}); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet-gate.wide", b.String())
	wideHasAll(t, b.String())
}

// A baseline saved by an earlier release (SkewPreflightReport
// gpufleet.dev/v1alpha2, its gates PASS, WARN, UNKNOWN, FAIL) still
// loads: verify against it says what it says against the same baseline
// in this release's words.
func TestVerifyReadsEarlierBaseline(t *testing.T) {
	c := readyCluster(t)
	dir := t.TempDir()
	now, old := filepath.Join(dir, "now.yaml"), filepath.Join(dir, "old.yaml")
	if r := run(t, getter(c), "", "preflight", "--target", "v1.37", "--save", now, "-q"); r.Code != 0 {
		t.Fatalf("preflight --save: exit %d\n%s", r.Code, r.Err)
	}
	data, err := os.ReadFile(now)
	if err != nil {
		t.Fatal(err)
	}
	// The gates' and the summary's status only: the inventory's skew
	// statuses were lower case in v1alpha2 already.
	var rep map[string]any
	if err := yaml.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	was := map[string]string{"ok": "PASS", "warn": "WARN", "unknown": "UNKNOWN", "fail": "FAIL"}
	rep["apiVersion"] = cli.APIVersionV1Alpha2
	for _, g := range append(rep["items"].([]any), rep["summary"]) {
		g := g.(map[string]any)
		w, ok := was[g["status"].(string)]
		if !ok {
			t.Fatalf("status %v is not a word of this release", g["status"])
		}
		g["status"] = w
	}
	b, err := yaml.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if err := os.WriteFile(old, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	want := run(t, getter(c), "", "verify", "--baseline", now, "--color", "never")
	got := run(t, getter(c), "", "verify", "--baseline", old, "--color", "never")
	if got.Code != want.Code || strings.ReplaceAll(got.Out, old, now) != want.Out || got.Err != want.Err {
		t.Errorf("verify against the earlier baseline: exit %d\n%s%s\nwant exit %d\n%s%s", got.Code, got.Out, got.Err, want.Code, want.Out, want.Err)
	}
}
