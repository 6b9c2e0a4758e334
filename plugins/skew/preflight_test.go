package skew

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
)

// readyCluster is the check's scenario with every node Ready.
func readyCluster(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	c := cluster("v1.37.2", objs...)
	nodes, err := c.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestPreflightCommand(t *testing.T) {
	r := run(t, getter(readyCluster(t)), "", "preflight", "--target", "v1.37", "-o", "json")
	// Pool h100-d (1.33) is fine for preflight, but no /metrics and no
	// dynamic client: UNKNOWN gates, which count only at --fail-on warning.
	if r.Code != cli.ExitOK {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	var rep PreflightReport
	if err := yaml.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != KindPreflightReport || rep.APIVersion != cli.APIVersionV1Alpha3 || rep.Target != "1.37" || len(rep.Items) != len(preflight.GateOrder) {
		t.Errorf("report header %+v, %d items", rep.Header, len(rep.Items))
	}
	for i, g := range rep.Items {
		if g.Name != preflight.GateOrder[i] {
			t.Errorf("item %d is %s, want %s", i, g.Name, preflight.GateOrder[i])
		}
	}
	if rep.Summary.Unknown == 0 || len(rep.Evidence.Nodes) != 6 {
		t.Errorf("summary %+v, %d nodes", rep.Summary, len(rep.Evidence.Nodes))
	}
	w := run(t, getter(readyCluster(t)), "", "preflight", "--target", "v1.37", "--fail-on", "warning", "-q")
	if w.Code != cli.ExitFindings || w.Out != "" {
		t.Errorf("--fail-on warning -q: exit %d, out %q", w.Code, w.Out)
	}
	tbl := run(t, getter(readyCluster(t)), "", "preflight", "--target", "v1.37", "--color", "never")
	if !strings.Contains(tbl.Out, "GATE") || !strings.Contains(tbl.Out, "pre-flight to 1.37:") {
		t.Errorf("table:\n%s", tbl.Out)
	}
}

func TestPreflightUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"preflight"},
		{"preflight", "--target", "soon"},
		{"preflight", "--target", "v1.37", "--etcd-quota", "lots"},
		{"verify"},
	} {
		r := run(t, &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}, "", args...)
		if r.Code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want 2\n%s", args, r.Code, r.Err)
		}
	}
	// A file that does not exist is an input refused (3), before the
	// cluster.
	for _, args := range [][]string{
		{"preflight", "--target", "v1.37", "--compat", "/nonexistent"},
		{"verify", "--baseline", "/nonexistent"},
	} {
		r := run(t, &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}, "", args...)
		if r.Code != cli.ExitUnavailable || !strings.Contains(r.Err, " /nonexistent: does not exist") {
			t.Errorf("%v: exit %d, want 3\n%s", args, r.Code, r.Err)
		}
	}
}

func TestCompatPrintsAValidCompatFile(t *testing.T) {
	r := run(t, &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}, "", "compat", "-o", "yaml")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Err)
	}
	c, err := preflight.ParseCompat([]byte(r.Out))
	if err != nil || len(c.Addons) != len(preflight.DefaultCompat().Addons) {
		t.Fatalf("compat -o yaml does not read back: %v\n%s", err, r.Out)
	}
	// An override without cert-manager's rows makes it UNKNOWN, never PASS.
	path := filepath.Join(t.TempDir(), "compat.yaml")
	if err := os.WriteFile(path, []byte("dataDate: \"2026-12-01\"\naddons:\n- {name: cluster-autoscaler, rule: matchMinor, source: https://example.com}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cm := deployment("cert-manager", "quay.io/jetstack/cert-manager-controller:v1.18.2")
	p := run(t, getter(readyCluster(t, cm)), "", "preflight", "--target", "v1.37", "--compat", path, "-o", "json")
	var rep PreflightReport
	if err := yaml.Unmarshal([]byte(p.Out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Items {
		if g.Name == preflight.GateAddons && (g.Status != preflight.StatusUnknown || !strings.Contains(strings.Join(g.Evidence, "\n"), "cert-manager is not in the compatibility table")) {
			t.Errorf("addons with the override: %s %v", g.Status, g.Evidence)
		}
	}
}

func TestSaveAndVerify(t *testing.T) {
	c := readyCluster(t)
	path := filepath.Join(t.TempDir(), "before.yaml")
	if r := run(t, getter(c), "", "preflight", "--target", "v1.37", "--save", path, "-q"); r.Code != 0 {
		t.Fatalf("preflight --save: exit %d\n%s", r.Code, r.Err)
	}
	same := run(t, getter(c), "", "verify", "--baseline", path)
	if same.Code != 0 || !strings.Contains(same.Out, "0 regressions") {
		t.Errorf("verify of an unchanged cluster: exit %d\n%s%s", same.Code, same.Out, same.Err)
	}
	// Node b-0 (pool h100-b, 1.35) should be on 1.37 after this wave.
	n, err := c.CoreV1().Nodes().Get(t.Context(), "c-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := run(t, getter(c), "", "verify", "--baseline", path, "--pool", "h100-b=v1.37", "-o", "yaml")
	if r.Code != cli.ExitFindings {
		t.Fatalf("verify: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	for _, want := range []string{"kind: node-version", "object: node/b-0", "kind: node-not-ready", "object: node/c-0", "kind: SkewVerifyReport"} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("no %q in\n%s", want, r.Out)
		}
	}
	// A SkewReport is not a baseline.
	skewRep := filepath.Join(t.TempDir(), "skew.yaml")
	if err := os.WriteFile(skewRep, []byte(run(t, getter(cluster("v1.37.2")), "", "-o", "yaml").Out), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, getter(c), "", "verify", "--baseline", skewRep); r.Code != cli.ExitUnavailable || !strings.Contains(r.Err, "want a SkewPreflightReport") {
		t.Errorf("verify with a SkewReport: exit %d", r.Code)
	}
}

func TestPreflightContexts(t *testing.T) {
	healthy := readyCluster(t)
	notReady := cluster("v1.37.2") // nodes without a Ready condition
	cg := cli.NewTestClientGetter().WithKube(healthy)
	cg.PerContext = map[string]*cli.TestClientGetter{
		"prod":    {KubeClient: healthy, Meta: cli.Metadata{Context: "prod"}},
		"staging": {KubeClient: notReady, Meta: cli.Metadata{Context: "staging"}},
		"dead":    {Meta: cli.Metadata{Context: "dead"}, Err: errors.New("dial tcp: connection refused")},
	}
	r := run(t, cg, "", "preflight", "--target", "v1.37", "--contexts", "prod,staging", "-o", "json")
	if r.Code != cli.ExitFindings {
		t.Fatalf("exit %d, want 1 (staging's nodes are not Ready)\n%s%s", r.Code, r.Out, r.Err)
	}
	golden(t, "preflight-contexts.json", goldenfile.Steady(r.Out, "collectedAt"))
	if !strings.Contains(r.Out, `"kind": "SkewPreflightReportList"`) {
		t.Errorf("not a list:\n%s", r.Out)
	}
	if i, j := strings.Index(r.Out, `"context": "staging"`), strings.Index(r.Out, `"context": "prod"`); i < 0 || j < 0 || i > j {
		t.Errorf("staging (FAIL) must come before prod")
	}
	all := run(t, cg, "", "preflight", "--target", "v1.37", "--all-contexts", "--color", "never")
	if all.Code != cli.ExitUnavailable || !strings.Contains(all.Err, "error: context dead:") || !strings.Contains(all.Out, "CONTEXT") {
		t.Errorf("--all-contexts with a dead context: exit %d\n%s%s", all.Code, all.Out, all.Err)
	}
	goldenfile.CheckFits(t, all.Out, cli.DefaultTableWidth)
	if r := run(t, cg, "", "preflight", "--target", "v1.36"); r.Code != cli.ExitUsage || !strings.Contains(r.Err, "older than the apiserver 1.37") {
		t.Errorf("--target older than the apiserver: exit %d\n%s", r.Code, r.Err)
	}
	if r := run(t, cg, "", "preflight", "--target", "v1.37", "--all-contexts", "--save", "x.yaml"); r.Code != cli.ExitUsage {
		t.Errorf("--save with --all-contexts: exit %d", r.Code)
	}
}
