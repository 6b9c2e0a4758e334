//go:build e2e

package skewe2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
)

// The pools of the scenario: one per kubelet minor.
var pools = []harness.GPUPool{
	{Name: "skew-137", Nodes: 2, KubeletVersion: "v1.37.2"},
	{Name: "skew-135", Nodes: 1, KubeletVersion: "v1.35.4"},
	{Name: "skew-134", Nodes: 2, KubeletVersion: "v1.34.6"},
	{Name: "skew-133", Nodes: 1, KubeletVersion: "v1.33.10"},
}

var (
	setupOnce sync.Once
	setupErr  error
)

// scenario creates the pools and a kubeadm-like kube-system once: static
// pods for two apiservers, the controller-manager and the scheduler, a
// kube-proxy DaemonSet and a CoreDNS Deployment (none of them run: their
// node selector matches no node).
func scenario(t *testing.T) *harness.ControlPlane {
	t.Helper()
	cp := harness.Shared(t)
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, p := range pools {
			if _, err := cp.CreateGPUNodes(ctx, p); err != nil {
				setupErr = err
				return
			}
		}
		pods := cp.Client.CoreV1().Pods("kube-system")
		for _, sp := range []struct{ component, node, tag string }{
			{"kube-apiserver", "skew-137-0", harness.KubeVersion},
			{"kube-apiserver", "skew-137-1", harness.KubeVersion},
			{"kube-controller-manager", "skew-137-0", harness.KubeVersion},
			{"kube-scheduler", "skew-137-1", "v1.37.1"},
		} {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: sp.component + "-" + sp.node, Labels: map[string]string{"component": sp.component, "tier": "control-plane"}},
				Spec: corev1.PodSpec{NodeName: sp.node, Containers: []corev1.Container{{Name: sp.component, Image: "registry.k8s.io/" + sp.component + ":" + sp.tag}},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			}
			if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				setupErr = err
				return
			}
		}
		nowhere := map[string]string{"gpufleet.dev/e2e-nowhere": "true"}
		tmpl := func(name, image string) corev1.PodTemplateSpec {
			return corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": name}},
				Spec:       corev1.PodSpec{NodeSelector: nowhere, Containers: []corev1.Container{{Name: name, Image: image}}},
			}
		}
		sel := func(name string) *metav1.LabelSelector {
			return &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}}
		}
		if _, err := cp.Client.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Labels: map[string]string{"k8s-app": "kube-proxy"}},
			Spec:       appsv1.DaemonSetSpec{Selector: sel("kube-proxy"), Template: tmpl("kube-proxy", "registry.k8s.io/kube-proxy:"+harness.KubeVersion)},
		}, metav1.CreateOptions{}); err != nil {
			setupErr = err
			return
		}
		if _, err := cp.Client.AppsV1().Deployments("kube-system").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "coredns", Labels: map[string]string{"k8s-app": "kube-dns"}},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel("coredns"), Template: tmpl("coredns", "registry.k8s.io/coredns/coredns:v1.12.1")},
		}, metav1.CreateOptions{}); err != nil {
			setupErr = err
			return
		}
	})
	if setupErr != nil {
		t.Fatalf("scenario: %v", setupErr)
	}
	return cp
}

// skew runs kubectl-skew with the control plane's kubectl first on PATH.
func skew(t *testing.T, cp *harness.ControlPlane, args ...string) plugintest.Result {
	t.Helper()
	path := filepath.Dir(cp.Binaries.Kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")
	return plugintest.RunCmd(t, plugintest.Binary(t, "kubectl-skew"), plugintest.Cmd{
		Args: append([]string{"--kubeconfig", cp.Kubeconfig}, args...),
		Env:  []string{"PATH=" + path},
	})
}

type finding struct {
	Component string `json:"component"`
	Instance  string `json:"instance"`
	Version   string `json:"version"`
	Against   string `json:"against"`
	Skew      int    `json:"skew"`
	Rule      string `json:"rule"`
	Status    string `json:"status"`
	Severity  string `json:"severity"`
	Message   string `json:"message"`
}

type report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Context       string `json:"context"`
		ServerVersion string `json:"serverVersion"`
	} `json:"metadata"`
	Inventory struct {
		Server struct {
			GitVersion       string `json:"gitVersion"`
			EmulationVersion string `json:"emulationVersion"`
		} `json:"server"`
		Components []struct {
			Name, Instance, Version, State string
		} `json:"components"`
		Pools []struct {
			Name     string `json:"name"`
			Nodes    int    `json:"nodes"`
			Versions []struct {
				Version string `json:"version"`
				Nodes   int    `json:"nodes"`
			} `json:"versions"`
		} `json:"pools"`
		Notes []string `json:"notes"`
	} `json:"inventory"`
	Items   []finding `json:"items"`
	Summary struct {
		MaxSkew     int      `json:"maxSkew"`
		Violations  int      `json:"violations"`
		PoolsAtEdge []string `json:"poolsAtEdge"`
		Status      string   `json:"status"`
		Findings    int      `json:"findings"`
	} `json:"summary"`
}

func decode(t *testing.T, r plugintest.Result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Stdout), v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r)
	}
}

// verdicts maps "component instance rule" to status for the rows of the
// scenario (other packages' leftovers are ignored).
func verdicts(items []finding) map[string]string {
	out := map[string]string{}
	for _, f := range items {
		out[f.Component+" "+f.Instance+" "+f.Rule] = f.Status
	}
	return out
}

func TestSkewCheckLive(t *testing.T) {
	cp := scenario(t)
	r := skew(t, cp, "-o", "json")
	if r.ExitCode != 1 {
		t.Fatalf("exit %d, want 1 (pool skew-133 violates)\n%s", r.ExitCode, r)
	}
	var rep report
	decode(t, r, &rep)
	if rep.Kind != "SkewReport" || rep.Metadata.ServerVersion != harness.KubeVersion || rep.Inventory.Server.GitVersion != harness.KubeVersion {
		t.Errorf("header %+v server %+v", rep.Metadata, rep.Inventory.Server)
	}
	// KWOK keeps the kubelet versions the fixtures set.
	got := map[string]string{}
	for _, p := range rep.Inventory.Pools {
		var vs []string
		for _, v := range p.Versions {
			vs = append(vs, v.Version)
		}
		got[p.Name] = strings.Join(vs, ",")
	}
	for _, p := range pools {
		if got[p.Name] != p.KubeletVersion {
			t.Errorf("pool %s: kubelet versions %q, want %q", p.Name, got[p.Name], p.KubeletVersion)
		}
	}
	v := verdicts(rep.Items)
	want := map[string]string{
		"kube-apiserver /version apiserver-ha":                                                "ok",
		"kube-apiserver kube-apiserver-skew-137-0 apiserver-ha":                               "ok",
		"kube-apiserver kube-apiserver-skew-137-1 apiserver-ha":                               "ok",
		"kube-apiserver support window support-window":                                        "ok",
		"kube-controller-manager kube-controller-manager-skew-137-0 controllers-vs-apiserver": "ok",
		"kube-scheduler kube-scheduler-skew-137-1 controllers-vs-apiserver":                   "ok",
		"kubelet pool skew-137 kubelet-vs-apiserver":                                          "ok",
		"kubelet pool skew-135 kubelet-vs-apiserver":                                          "ok",
		"kubelet pool skew-134 kubelet-vs-apiserver":                                          "warn",
		"kubelet pool skew-133 kubelet-vs-apiserver":                                          "fail",
		"kube-proxy daemonset/kube-proxy kube-proxy-vs-apiserver":                             "ok",
		"kube-proxy daemonset/kube-proxy kube-proxy-vs-kubelet":                               "fail",
		"coredns deployment/coredns inventory":                                                "info",
		"kubectl PATH kubectl-vs-apiserver":                                                   "ok",
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("%s: %q, want %q", k, v[k], w)
		}
	}
	if rep.Summary.MaxSkew != 4 || rep.Summary.Status != "fail" || !cmp.Equal(rep.Summary.PoolsAtEdge, []string{"skew-134"}) {
		t.Errorf("summary %+v", rep.Summary)
	}
	if r.Stderr != "" {
		t.Errorf("stderr: %s", r.Stderr)
	}

	// Table, quiet and --fail-on.
	tbl := skew(t, cp, "--color", "never")
	t.Logf("kubectl skew:\n%s", tbl.Stdout)
	if tbl.ExitCode != 1 || !strings.Contains(tbl.Stdout, "pool skew-133") || !strings.Contains(tbl.Stdout, "FAIL") ||
		!strings.Contains(tbl.Stdout, "max skew 4 minors") {
		t.Errorf("table:\n%s", tbl)
	}
	goldenfile.CheckFits(t, tbl.Stdout, cli.DefaultTableWidth)
	if q := skew(t, cp, "-q"); q.ExitCode != 1 || q.Stdout != "" || q.Stderr != "" {
		t.Errorf("-q: %s", q)
	}
	if bad := skew(t, cp, "--policy", "n-1", "-o", "yaml"); bad.ExitCode != 1 || !strings.Contains(bad.Stdout, "fleet-policy") {
		t.Errorf("--policy n-1: %s", bad)
	}
}

// TestSkewPlanLiveMatchesOffline plans to v1.37 live and from a saved
// report and expects the same answer, byte for byte, but for the offline
// plan's warning that the report holds no inference read of the GPU pools.
func TestSkewPlanLiveMatchesOffline(t *testing.T) {
	cp := scenario(t)
	saved := skew(t, cp, "-o", "yaml")
	if saved.ExitCode != 1 {
		t.Fatalf("saving: %s", saved)
	}
	file := filepath.Join(t.TempDir(), "before.yaml")
	if err := os.WriteFile(file, []byte(saved.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "table"} {
		live := skew(t, cp, "plan", "--target", "v1.37", "-o", format)
		offline := plugintest.Run(t, "kubectl-skew", "plan", "--from-file", file, "--target", "v1.37", "-o", format, "--kubeconfig", "/nonexistent")
		if live.ExitCode != 1 || offline.ExitCode != 1 {
			t.Errorf("%s: exit live %d offline %d, want 1 (pool skew-133 is out of policy now)\n%s\n%s", format, live.ExitCode, offline.ExitCode, live, offline)
		}
		// The saved report holds no inference read of the GPU pools:
		// the offline plan says so first (one warning line, in either
		// format, before the others) and is otherwise the live plan.
		var lines []string
		warned := 0
		for _, l := range strings.SplitAfter(offline.Stdout, "\n") {
			if strings.Contains(l, "GPU pool(s) ") && strings.Contains(l, ": the saved report "+file+" holds no read of their workloads") {
				warned++
				continue
			}
			lines = append(lines, l)
		}
		if warned != 1 {
			t.Errorf("%s: offline plan warns %d times that %s holds no inference read, want once\n%s", format, warned, file, offline.Stdout)
		}
		if got := strings.Join(lines, ""); live.Stdout != got {
			t.Errorf("%s: live and offline plans differ\n%s", format, cmp.Diff(live.Stdout, got))
		}
	}
	var plan struct {
		Steps []struct {
			Phase, Pool, From, To, Status string
		} `json:"steps"`
		Pools []struct {
			Name              string `json:"name"`
			MustUpgradeBefore string `json:"mustUpgradeBefore"`
			NoSlack           bool   `json:"noSlack"`
			Status            string `json:"status"`
		} `json:"pools"`
		Summary struct {
			Hops int `json:"hops"`
		} `json:"summary"`
	}
	t.Logf("kubectl skew plan --target v1.38:\n%s", skew(t, cp, "plan", "--target", "v1.38", "--color", "never").Stdout)
	r := skew(t, cp, "plan", "--target", "v1.37", "-o", "json")
	decode(t, r, &plan)
	var steps []string
	for _, s := range plan.Steps {
		steps = append(steps, s.Phase+" "+s.Pool+" "+s.From+"->"+s.To+" "+s.Status)
	}
	want := []string{
		"node-pool skew-133 1.33->1.37 fail",
		"node-pool skew-134 1.34->1.37 warn",
		"node-pool skew-135 1.35->1.37 ok",
	}
	if diff := cmp.Diff(want, steps); diff != "" || plan.Summary.Hops != 0 {
		t.Errorf("steps (-want +got)\n%s\nhops %d", diff, plan.Summary.Hops)
	}
	// A later target: three hops, skew-137 upgrades once and skew-134 is due first.
	r = skew(t, cp, "plan", "--target", "v1.38", "--fail-on", "blocking", "-o", "json")
	decode(t, r, &plan)
	if plan.Summary.Hops != 1 || r.ExitCode != 1 {
		t.Errorf("plan to 1.38: hops %d exit %d\n%s", plan.Summary.Hops, r.ExitCode, r)
	}
}

// TestSkewControlPlaneBehindFromFile rewrites a saved report into a control
// plane at 1.34 with kubelets at 1.34 and 1.31, then checks and plans it
// offline to 1.37.
func TestSkewControlPlaneBehindFromFile(t *testing.T) {
	cp := scenario(t)
	saved := skew(t, cp, "-o", "yaml")
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(saved.Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	inv := doc["inventory"].(map[string]any)
	inv["server"] = map[string]any{"gitVersion": "v1.34.2"}
	var comps []any
	for _, c := range inv["components"].([]any) {
		m := c.(map[string]any)
		if v, ok := m["version"].(string); ok && strings.HasPrefix(v, "v1.37") {
			m["version"] = "v1.34.2"
		}
		comps = append(comps, m)
	}
	inv["components"] = comps
	inv["pools"] = []any{
		map[string]any{"name": "train", "nodes": 4, "versions": []any{map[string]any{"version": "v1.34.2", "nodes": 4}}},
		map[string]any{"name": "legacy", "nodes": 2, "versions": []any{map[string]any{"version": "v1.31.14", "nodes": 2}}},
	}
	delete(doc, "items")
	delete(doc, "summary")
	out, _ := yaml.Marshal(doc)
	file := filepath.Join(t.TempDir(), "behind.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}

	check := plugintest.Run(t, "kubectl-skew", "--from-file", file, "-o", "json", "--kubeconfig", "/nonexistent")
	var rep report
	decode(t, check, &rep)
	v := verdicts(rep.Items)
	// 1.34 left support on 2026-10-27 (a violation once the date has
	// passed); the legacy pool sits exactly at the limit.
	if check.ExitCode != 1 || v["kubelet pool legacy kubelet-vs-apiserver"] != "warn" || v["kubelet pool train kubelet-vs-apiserver"] != "ok" {
		t.Errorf("check from file: %s", check)
	}

	r := plugintest.Run(t, "kubectl-skew", "plan", "--from-file", file, "--target", "v1.37", "-o", "json", "--kubeconfig", "/nonexistent")
	if r.ExitCode != 0 {
		t.Fatalf("plan: %s", r)
	}
	var plan struct {
		Pools []struct {
			Name              string `json:"name"`
			MustUpgradeBefore string `json:"mustUpgradeBefore"`
			Upgrades          []struct{ From, To string }
			UpgradesEveryHop  int  `json:"upgradesEveryHop"`
			Saved             int  `json:"nodeDisruptionsSaved"`
			NoSlack           bool `json:"noSlack"`
		} `json:"pools"`
		Steps []struct {
			ControlPlane string `json:"controlPlane"`
			Phase        string `json:"phase"`
			Pool         string `json:"pool"`
		} `json:"steps"`
		Summary struct {
			From, Target                             string
			Hops                                     int
			NodeDisruptions, NodeDisruptionsEveryHop int
			NodeDisruptionsSaved                     int
		} `json:"summary"`
		Warnings []string `json:"warnings"`
	}
	decode(t, r, &plan)
	type pp struct {
		Name, Before, Upgrades string
		Every, Saved           int
		NoSlack                bool
	}
	var got []pp
	for _, p := range plan.Pools {
		var ups []string
		for _, u := range p.Upgrades {
			ups = append(ups, u.From+"->"+u.To)
		}
		got = append(got, pp{p.Name, p.MustUpgradeBefore, strings.Join(ups, " "), p.UpgradesEveryHop, p.Saved, p.NoSlack})
	}
	want := []pp{
		{"legacy", "1.35", "1.31->1.34 1.34->1.37", 4, 4, true},
		{"train", "", "1.34->1.37", 3, 8, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools (-want +got)\n%s", diff)
	}
	if plan.Summary.Hops != 3 || plan.Summary.NodeDisruptions != 8 || plan.Summary.NodeDisruptionsEveryHop != 20 || plan.Summary.NodeDisruptionsSaved != 12 {
		t.Errorf("summary %+v", plan.Summary)
	}
	// Order: legacy before the first hop; per hop pre-flight, etcd, apiservers, controllers, addons; then the last wave.
	var order []string
	for _, s := range plan.Steps {
		order = append(order, s.ControlPlane+" "+s.Phase+" "+s.Pool)
	}
	if len(order) != 18 || order[0] != "1.34 node-pool legacy" || order[1] != "1.35 pre-flight " || order[3] != "1.35 apiservers " || order[17] != "1.37 node-pool train" {
		t.Errorf("order %q", order)
	}
	if !strings.Contains(strings.Join(plan.Warnings, "\n"), "apiservers are mixed") {
		t.Errorf("warnings %q", plan.Warnings)
	}
}

// TestSkewForbidden reads as a user who may list nodes but nothing in
// kube-system or PodDisruptionBudgets (skipped with notes) and as one who
// may not list nodes (exit 3).
func TestSkewForbidden(t *testing.T) {
	cp := scenario(t)
	ctx := context.Background()
	name := "gpufleet-skew-e2e-node-reader"
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	var r plugintest.Result
	// RBAC caches take a moment.
	_ = harness.Eventually(ctx, "node reader can list nodes", 20*time.Second, func(context.Context) (bool, error) {
		r = skew(t, cp, "--as", name, "-o", "json")
		return r.ExitCode == 1, nil
	})
	if r.ExitCode != 1 {
		t.Fatalf("node reader: %s", r)
	}
	var rep report
	decode(t, r, &rep)
	if len(rep.Inventory.Notes) != 4 || !strings.Contains(r.Stderr, "note: listing pods in kube-system is forbidden") ||
		!strings.Contains(r.Stderr, "note: listing poddisruptionbudgets (policy) in all namespaces is forbidden: nodes that host stateful services are not moved first") {
		t.Errorf("notes %q stderr %q", rep.Inventory.Notes, r.Stderr)
	}
	if v := verdicts(rep.Items); v["kubelet pool skew-133 kubelet-vs-apiserver"] != "fail" {
		t.Errorf("kubelets must still be checked: %v", v)
	}

	nobody := skew(t, cp, "--as", "gpufleet-skew-e2e-nobody")
	if nobody.ExitCode != 3 || !strings.HasPrefix(nobody.Stderr, "error: ") || !strings.Contains(nobody.Stderr, "nodes") {
		t.Errorf("no node access: %s", nobody)
	}
}

// TestSkewFleet checks the live context and a dead one together.
func TestSkewFleet(t *testing.T) {
	cp := scenario(t)
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	live := cfg.CurrentContext
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: cfg.Contexts[live].AuthInfo}
	kc := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	// The control plane's kubectl first on PATH: max skew counts kubectl
	// too, and the machine's own kubectl may be any version.
	path := filepath.Dir(cp.Binaries.Kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")
	r := plugintest.RunCmd(t, plugintest.Binary(t, "kubectl-skew"), plugintest.Cmd{
		Args: []string{"--kubeconfig", kc, "--all-contexts", "-o", "json", "--request-timeout", "5s"},
		Env:  []string{"PATH=" + path},
	})
	if r.ExitCode != 3 {
		t.Fatalf("exit %d, want 3 (one context is dead)\n%s", r.ExitCode, r)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Context  string  `json:"context"`
			Error    string  `json:"error"`
			ExitCode int     `json:"exitCode"`
			Report   *report `json:"report"`
		} `json:"items"`
	}
	decode(t, r, &list)
	if list.Kind != "SkewReportList" || len(list.Items) != 2 || list.Items[0].Context != "dead" || list.Items[0].ExitCode != 3 ||
		list.Items[1].Context != live || list.Items[1].ExitCode != 1 || list.Items[1].Report == nil || list.Items[1].Report.Summary.MaxSkew != 4 {
		t.Errorf("fleet %+v\n%s", list, r)
	}
	tbl := plugintest.Run(t, "kubectl-skew", "--kubeconfig", kc, "--contexts", live, "--color", "never")
	if tbl.ExitCode != 1 || !strings.Contains(tbl.Stdout, "MAX-SKEW") || !strings.Contains(tbl.Stdout, "skew-134") {
		t.Errorf("fleet table: %s", tbl)
	}
}
