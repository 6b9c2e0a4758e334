package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func node(name, pool, kubelet string, ready bool, gpus int64) *corev1.Node {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"cloud.google.com/gke-nodepool": pool}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, Reason: "KubeletNotReady"}}}}
	if gpus > 0 {
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return n
}

func deploy(ns, name, image string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}}}
}

func mustVersion(s string) skew.Version {
	v, err := skew.ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

func TestCompatJudge(t *testing.T) {
	c := DefaultCompat()
	if c.DataDate == "" || len(c.Addons) == 0 {
		t.Fatal("embedded table does not parse")
	}
	for _, a := range c.Addons {
		if !strings.HasPrefix(a.Source, "https://") || a.Checked == "" {
			t.Errorf("addon %s: every row names its source page and what was checked", a.Name)
		}
	}
	t137 := mustVersion("v1.37")
	for _, tc := range []struct {
		name, version string
		target        skew.Version
		want          Status
	}{
		{"cert-manager", "v1.18.2", t137, StatusFail},
		{"cert-manager", "v1.20.0", mustVersion("v1.34"), StatusPass},
		{"cert-manager", "v1.99.0", t137, StatusUnknown},
		{"cluster-autoscaler", "v1.37.1", t137, StatusPass},
		{"cluster-autoscaler", "v1.36.0", t137, StatusWarn},
		{"kube-proxy", "v1.36.2", t137, StatusPass},
		{"kube-proxy", "v1.33.0", t137, StatusFail},
		{"coredns", "v1.14.6", t137, StatusPass},
		{"coredns", "v1.12.1", t137, StatusWarn},
		{"coredns", "v1.12.1", mustVersion("v1.36"), StatusUnknown},
		{"kueue", "v0.17.0", t137, StatusPass},
		{"ingress-nginx", "v1.12.0", t137, StatusUnknown},
		{"cert-manager", "latest", t137, StatusUnknown},
	} {
		got := c.Judge(tc.name, tc.version, tc.target)
		if got.Status != tc.want {
			t.Errorf("Judge(%s %s, %s) = %s (%s), want %s", tc.name, tc.version, tc.target.MinorString(), got.Status, got.Message, tc.want)
		}
	}
	if v := c.Judge("cert-manager", "v1.18.2", t137); !strings.Contains(v.Message, "cert-manager.io/docs/releases") {
		t.Errorf("the verdict names no source: %s", v.Message)
	}
}

func TestParseCompatRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"no source":    "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: matchMinor}\n",
		"bad rule":     "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: vibes, source: https://x}\n",
		"bad range":    "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: releases, source: https://x, releases: [{version: \"1.2\", from: \"1.35\", to: \"1.30\"}]}\n",
		"no date":      "addons: []\n",
		"twice":        "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: matchMinor, source: https://x}\n- {name: x, rule: matchMinor, source: https://x}\n",
		"unknown key":  "dataDate: \"2026-01-01\"\nrows: []\n",
		"kubeadm junk": "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: kubeadm, source: https://x, releases: [{version: junk, kubernetes: \"1.37\"}]}\n",

		// The fields of sourced rows.
		"bad outside":      "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: releases, outside: maybe, source: https://x}\n",
		"no check":         "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: noPublishedRange, source: https://x}\n",
		"rows on no range": "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: noPublishedRange, check: curl x, source: https://x, releases: [{version: \"1.0\", from: \"1.30\"}]}\n",
		"bad read":         "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: matchMinor, read: yesterday, source: https://x}\n",
		"patch in to":      "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: releases, source: https://x, releases: [{version: \"1.0\", from: \"1.30\", to: \"1.31.2\"}]}\n",
		"no from":          "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: releases, source: https://x, releases: [{version: \"1.0\", to: \"1.31\"}]}\n",
		"oldest junk":      "dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: oldestRecommended, source: https://x, releases: [{kubernetes: \"1.31\", version: junk}]}\n",
	} {
		if _, err := ParseCompat([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestEtcdDBSize(t *testing.T) {
	text := "# HELP apiserver_storage_size_bytes [STABLE] Size of the storage database file physically allocated in bytes.\n" +
		"# TYPE apiserver_storage_size_bytes gauge\n" +
		"apiserver_storage_size_bytes{storage_cluster_id=\"etcd-0\"} 1.5e+09\n" +
		"apiserver_storage_size_bytes{storage_cluster_id=\"etcd-1\"} 2.0e+06\n"
	size, metric, ok, err := EtcdDBSize([]byte(text))
	if err != nil || !ok || metric != "apiserver_storage_size_bytes" || size != 1.5e9 {
		t.Fatalf("EtcdDBSize = %v %s %v %v", size, metric, ok, err)
	}
	// Only the size metrics' lines are parsed, wherever they are.
	noise := "# HELP apiserver_storage_size_bytes_total other\n# TYPE apiserver_storage_size_bytes_total counter\napiserver_storage_size_bytes_total 9e+12\n" +
		"# TYPE y histogram\ny_bucket{le=\"1\"} 3\n"
	if size, _, ok, err := EtcdDBSize([]byte(noise + text + noise)); err != nil || !ok || size != 1.5e9 {
		t.Errorf("among other metrics: %v %v %v", size, ok, err)
	}
	if size, metric, ok, _ := EtcdDBSize([]byte(noise + "# TYPE apiserver_storage_db_total_size_in_bytes gauge\napiserver_storage_db_total_size_in_bytes{endpoint=\"e\"} 7")); !ok || size != 7 || metric != "apiserver_storage_db_total_size_in_bytes" {
		t.Errorf("older metric, no newline: %v %s %v", size, metric, ok)
	}
	if _, _, ok, _ := EtcdDBSize([]byte("# TYPE x gauge\nx 1\n")); ok {
		t.Error("found a size in a text without the metric")
	}
	r := &Runner{Raw: func(_ context.Context, path string) ([]byte, error) { return nil, nil }}
	g := r.etcdGate(context.Background(), func(context.Context) ([]byte, error) { return []byte(text), nil }, nil)
	if g.Status != StatusFail {
		t.Errorf("1.5e9 of 2 GiB (70%%): %s %s", g.Status, g.Message)
	}
	r.EtcdQuota = 8 << 30
	if g := r.etcdGate(context.Background(), func(context.Context) ([]byte, error) { return []byte(text), nil }, nil); g.Status != StatusPass {
		t.Errorf("1.5e9 of 8 GiB: %s %s", g.Status, g.Message)
	}
	if g := r.etcdGate(context.Background(), func(context.Context) ([]byte, error) { return []byte("# TYPE x gauge\nx 1\n"), nil }, nil); g.Status != StatusUnknown {
		t.Errorf("no metric: %s %s", g.Status, g.Message)
	}
	// The apiserver answering that etcd is not ready fails; a request that
	// got no answer (or was refused) says nothing about etcd.
	notReady := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: "[-]etcd failed: reason withheld"}}
	for err, want := range map[error]Status{notReady: StatusFail, errors.New("connection refused"): StatusUnknown, apierrorsForbidden("", "get"): StatusUnknown} {
		r := &Runner{Raw: func(context.Context, string) ([]byte, error) { return nil, err }}
		if g := r.etcdGate(context.Background(), nil, nil); g.Status != want {
			t.Errorf("/readyz/etcd error %v: %s %s, want %s", err, g.Status, g.Message, want)
		}
	}
}

// The etcd gate judges the size against the quota of where etcd runs and
// gives the commands that work there: EKS's 8 GiB and no etcdctl on a
// managed control plane, none published by GKE, etcdctl in kubeadm's etcd
// static pod with its TLS flags, nothing to judge on k3s's SQLite; the 60%
// is stated as this tool's policy.
func TestEtcdGateWhereEtcdRuns(t *testing.T) {
	size := func(b float64) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) {
			return []byte(fmt.Sprintf("# TYPE apiserver_storage_size_bytes gauge\napiserver_storage_size_bytes{storage_cluster_id=\"e\"} %g\n", b)), nil
		}
	}
	r := &Runner{Raw: func(context.Context, string) ([]byte, error) { return nil, nil }}
	kubeadm := &skew.Inventory{Server: skew.ServerVersion{GitVersion: "v1.37.2"},
		Components: []skew.Component{{Name: skew.KindAPIServer, Instance: "kube-apiserver-cp-0", Version: "v1.37.2", State: skew.StateVisible}},
		Platform:   &skew.Platform{ControlPlanePods: 1}}
	eks := &skew.Inventory{Server: skew.ServerVersion{GitVersion: "v1.37.2-eks-1a2b3c4"}}
	gke := &skew.Inventory{Server: skew.ServerVersion{GitVersion: "v1.37.2-gke.100"}}
	sqlite := &skew.Inventory{Server: skew.ServerVersion{GitVersion: "v1.37.2+k3s1"}, Platform: &skew.Platform{ServerNodes: 1}}
	for _, tc := range []struct {
		name   string
		inv    *skew.Inventory
		bytes  float64
		status Status
		want   []string
		not    []string
	}{
		{"kubeadm above 60% of 2 GiB", kubeadm, 1.5e9, StatusFail, []string{"a policy, not an upstream rule",
			"kubectl -n kube-system exec etcd-cp-0 -- etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key defrag --cluster"}, nil},
		{"EKS: 1.5 GB of 8 GiB", eks, 1.5e9, StatusPass, []string{"quota (EKS's etcd limit)"}, nil},
		{"EKS above 60% of 8 GiB", eks, 6e9, StatusFail, []string{"the provider runs etcd", "apiserver_storage_objects"}, []string{"etcdctl", "defrag"}},
		{"GKE publishes no quota", gke, 6e9, StatusUnknown, []string{"GKE publishes no etcd quota", "--etcd-quota"}, []string{"etcdctl"}},
		{"k3s on SQLite", sqlite, 6e9, StatusPass, []string{"not etcd"}, []string{"etcdctl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := r.etcdGate(context.Background(), size(tc.bytes), func() *skew.Inventory { return tc.inv })
			text := g.Message + "\n" + g.Command + "\n" + strings.Join(g.Evidence, "\n")
			if g.Status != tc.status {
				t.Errorf("status %s, want %s:\n%s", g.Status, tc.status, text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("lacks %q:\n%s", w, text)
				}
			}
			for _, b := range tc.not {
				if strings.Contains(text, b) {
					t.Errorf("has %q:\n%s", b, text)
				}
			}
		})
	}
}

func failClosed(name, svcNS, svcName string, rules []admissionv1.RuleWithOperations, timeout int32) *admissionv1.ValidatingWebhookConfiguration {
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	return &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: name + ".example.com", FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout,
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: svcNS, Name: svcName}},
			Rules:        rules, AdmissionReviewVersions: []string{"v1"}}}}
}

func rule(group, res string) []admissionv1.RuleWithOperations {
	return []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{res}}}}
}

func TestWebhooksGate(t *testing.T) {
	kc := fake.NewClientset(failClosed("dead", "policy", "gone", rule("apps", "deployments"), 5))
	g := (&Runner{Kube: kc}).webhooksGate(context.Background())
	if g.Status != StatusFail || !strings.Contains(strings.Join(g.Evidence, "\n"), "service not found") {
		t.Errorf("dead webhook: %s %s %v", g.Status, g.Message, g.Evidence)
	}
	if g.Message != "1 webhook fails closed and cannot be reached" {
		t.Errorf("one dead webhook: message %q", g.Message)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "policy", Name: "up"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
	kc = fake.NewClientset(svc, failClosed("leases", "policy", "up", rule("coordination.k8s.io", "leases"), 30))
	g = (&Runner{Kube: kc}).webhooksGate(context.Background())
	ev := strings.Join(g.Evidence, "\n")
	// The Service has no ready endpoint: that fails first.
	if g.Status != StatusFail || !strings.Contains(ev, "leases") || !strings.Contains(ev, "timeoutSeconds 30") {
		t.Errorf("leases webhook: %s %s\n%s", g.Status, g.Message, ev)
	}
	kc = fake.NewClientset()
	if g := (&Runner{Kube: kc}).webhooksGate(context.Background()); g.Status != StatusPass {
		t.Errorf("no webhooks: %s %s", g.Status, g.Message)
	}
}

func TestForbiddenGateIsUnknownWithVerbAndResource(t *testing.T) {
	kc := fake.NewClientset()
	kc.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden("namespaces", "list")
	})
	g := (&Runner{Kube: kc, Target: mustVersion("v1.37")}).psaGate(context.Background())
	if g.Status != StatusUnknown || !strings.Contains(g.Message, "list namespaces") || !strings.Contains(g.Message, "forbidden") {
		t.Errorf("forbidden namespaces: %s %s", g.Status, g.Message)
	}
}

func TestPSAGate(t *testing.T) {
	kc := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.36"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "floating", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "implicit", Labels: map[string]string{"pod-security.kubernetes.io/warn": "restricted"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	)
	g := (&Runner{Kube: kc, Target: mustVersion("v1.37")}).psaGate(context.Background())
	ev := strings.Join(g.Evidence, "\n")
	if g.Status != StatusWarn || !strings.Contains(ev, "namespace floating") || !strings.Contains(ev, "namespace implicit") || strings.Contains(ev, "pinned") {
		t.Errorf("PSA: %s %s\n%s", g.Status, g.Message, ev)
	}
	// The gate runs no dry run: its command does, against today's
	// apiserver; the message says so, and what the target adds.
	if !strings.Contains(g.Message, "the command's server-side dry run lists the pods the level forbids, as the running apiserver judges them") || strings.Contains(g.Message, "the dry run below") {
		t.Errorf("PSA message: %s", g.Message)
	}
	for _, tc := range []struct{ server, says string }{
		{"v1.33.4", "checks 1.37 adds, which only an apiserver at 1.37 applies: hostProbesAndHostLifecycle (baseline, v1.34)"},
		{"v1.35.2", "1.37 adds no Pod Security check over 1.35"},
	} {
		inv := skew.Inventory{Server: skew.ServerVersion{GitVersion: tc.server}}
		g := (&Runner{Kube: kc, Target: mustVersion("v1.37"), inventory: func() *skew.Inventory { return &inv }}).psaGate(context.Background())
		if !strings.HasSuffix(g.Message, tc.says) {
			t.Errorf("from %s: %s", tc.server, g.Message)
		}
	}
}

func TestLegacyTokenGate(t *testing.T) {
	sec := func(name string, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: labels}, Type: corev1.SecretTypeServiceAccountToken}
	}
	kc := fake.NewClientset(sec("used", map[string]string{LegacyTokenLastUsed: "2026-11-30"}), sec("idle", nil))
	g := (&Runner{Kube: kc, Now: func() time.Time { return now }}).legacyTokenGate(context.Background())
	if g.Status != StatusWarn || !strings.Contains(strings.Join(g.Evidence, "\n"), "ci/used last used 2026-11-30 (2 days ago)") {
		t.Errorf("legacy tokens: %s %s %v", g.Status, g.Message, g.Evidence)
	}
}

func TestCRDsGate(t *testing.T) {
	crd := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextv1.CustomResourceDefinitionSpec{Group: "example.com", Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"}, Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}, {Name: "v1beta1", Served: true}}},
		Status: apiextv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1beta1", "v1"}}}
	g := (&Runner{Ext: apiextfake.NewClientset(crd)}).crdsGate(context.Background())
	if g.Status != StatusWarn || !strings.Contains(g.Command, "crd-migrate run widgets.example.com") {
		t.Errorf("CRD gate: %s %s %s", g.Status, g.Message, g.Command)
	}
}

func TestRunWholeReport(t *testing.T) {
	one := int32(0)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web"},
		Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &intstr.IntOrString{IntVal: 0}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: one, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web-0", Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Controller: ptr(true)}}},
		Spec:   corev1.PodSpec{NodeName: "a-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	crash := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-x"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "coredns", RestartCount: 7,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}}
	kc := fake.NewClientset(node("a-0", "gpu-a", "v1.36.2", true, 8), node("a-1", "gpu-a", "v1.36.2", false, 8), pdb, web, crash,
		deploy("cert-manager", "cert-manager", "quay.io/jetstack/cert-manager-controller:v1.18.2"))
	kc.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.36.2"}
	ext := apiextfake.NewClientset()
	r := &Runner{Kube: kc, Ext: ext, Target: mustVersion("v1.37"), Compat: DefaultCompat(), Calendar: skew.DefaultCalendar(), Now: func() time.Time { return now }}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The inventory and every gate share one read of each kind.
	lists := map[string]int{}
	for _, a := range append(kc.Actions(), ext.Actions()...) {
		if a.GetVerb() == "list" {
			lists[a.GetResource().Resource]++
		}
	}
	for _, res := range []string{"nodes", "pods", "poddisruptionbudgets", "deployments", "daemonsets", "validatingwebhookconfigurations", "customresourcedefinitions"} {
		if lists[res] != 1 {
			t.Errorf("%s listed %d times, want once (%v)", res, lists[res], lists)
		}
	}
	got := map[string]Status{}
	for _, g := range res.Gates {
		got[g.Name] = g.Status
		if g.Command == "" && g.Status != StatusUnknown {
			t.Errorf("gate %s has no command", g.Name)
		}
	}
	want := map[string]Status{
		GateSupport: StatusPass, GateAddons: StatusFail, GateNodes: StatusFail, GateSystemPods: StatusFail, GateDrains: StatusFail,
		GateWebhooks: StatusPass, GateCRDs: StatusPass, GatePSA: StatusPass, GateLegacyToken: StatusPass,
		// No /metrics without a REST client, no dynamic client: named, not guessed.
		GateEtcd: StatusUnknown, GateRemovedAPIs: StatusUnknown,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("gate %s = %s, want %s", k, got[k], v)
		}
	}
	if len(res.Gates) != len(GateOrder) {
		t.Errorf("%d gates, want %d", len(res.Gates), len(GateOrder))
	}
	ev := res.Evidence
	if len(ev.Nodes) != 2 || ev.Nodes[0].GPUAllocatable != 8 || len(ev.SystemPods) != 1 || len(ev.Addons) != 1 || ev.Inventory.Server.GitVersion != "v1.36.2" {
		t.Errorf("evidence: %+v", ev)
	}
}

func ptr[T any](v T) *T { return &v }

func TestVerify(t *testing.T) {
	t0 := now.Add(-time.Hour)
	base := Evidence{CollectedAt: t0, Target: "1.37",
		Nodes:             []NodeFact{{Name: "a-0", Pool: "gpu-a", Kubelet: "v1.36.2", Ready: true, GPUAllocatable: 8}, {Name: "b-0", Pool: "gpu-b", Kubelet: "v1.36.2", Ready: false}},
		SystemPods:        []PodFact{{Name: "coredns-x", Phase: "Running"}, {Name: "flaky", Phase: "Running", Problem: "CrashLoopBackOff"}},
		Addons:            []Addon{{Name: "cluster-autoscaler", Namespace: "kube-system", Workload: "deployment/ca", Version: "v1.36.0"}},
		RemovedAPICallers: []string{"metrics old"},
		SystemWarnings:    []WarningFact{{Reason: "BackOff", Object: "daemonset/kube-proxy", First: t0.Add(-time.Hour), Last: t0, Count: 3}},
		Policy:            &PolicyEvidence{}}
	same := base
	same.CollectedAt = now
	if regs := Verify(base, same, VerifyOptions{}); len(regs) != 0 {
		t.Errorf("an unchanged cluster has regressions: %+v", regs)
	}
	later := now
	cur := Evidence{CollectedAt: now,
		Nodes:             []NodeFact{{Name: "a-0", Pool: "gpu-a", Kubelet: "v1.36.2", Ready: true, GPUAllocatable: 7}, {Name: "b-0", Pool: "gpu-b", Kubelet: "v1.37.0", Ready: false}},
		SystemPods:        []PodFact{{Name: "coredns-x", Phase: "Running", Problem: "CrashLoopBackOff", Restarts: 4}, {Name: "flaky", Phase: "Running", Problem: "CrashLoopBackOff"}},
		Addons:            []Addon{{Name: "cluster-autoscaler", Namespace: "kube-system", Workload: "deployment/ca", Version: "v1.36.0"}},
		RemovedAPICallers: []string{"metrics old", "objects new"},
		SystemWarnings: []WarningFact{{Reason: "BackOff", Object: "daemonset/kube-proxy", First: t0, Last: later, Count: 9},
			{Reason: "FailedCreate", Object: "daemonset/kube-proxy", First: later, Last: later, Count: 1}},
		Policy: &PolicyEvidence{}}
	regs := Verify(base, cur, VerifyOptions{PoolVersions: map[string]skew.Version{"gpu-a": mustVersion("v1.37")}, Addons: []string{"cluster-autoscaler"}})
	kinds := map[string]int{}
	for _, r := range regs {
		kinds[r.Kind]++
	}
	want := map[string]int{RegNodeVersion: 1, RegGPUAllocatable: 1, RegSystemPod: 1, RegAddon: 1, RegRemovedAPICalls: 1, RegWarningEvents: 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%s: %d regressions, want %d (%+v)", k, kinds[k], n, regs)
		}
	}
	// b-0 was already NotReady, flaky was already crash-looping: not regressions.
	if kinds[RegNodeNotReady] != 0 || len(regs) != 6 {
		t.Errorf("regressions: %+v", regs)
	}
	// A baseline without policy evidence proves no control: UNKNOWN, never
	// a silent pass.
	base.Policy = nil
	regs = Verify(base, same, VerifyOptions{})
	if len(regs) != 1 || regs[0].Kind != RegPolicyUnread || regs[0].Status != StatusUnknown {
		t.Errorf("no policy evidence in the baseline: %+v", regs)
	}
}

// A planned pool whose nodes were replaced is no regression as long as it
// keeps its size and GPUs; a planned pool with no node at all (a wrong
// name) and one that shrank are.
func TestVerifyPlannedPools(t *testing.T) {
	base := Evidence{CollectedAt: now.Add(-time.Hour), Target: "1.37", Nodes: []NodeFact{
		{Name: "old-0", Pool: "gpu-a", Kubelet: "v1.36.2", Ready: true, GPUAllocatable: 8},
		{Name: "old-1", Pool: "gpu-a", Kubelet: "v1.36.2", Ready: true, GPUAllocatable: 8},
		{Name: "cpu-0", Pool: "cpu", Kubelet: "v1.36.2", Ready: true}}, Policy: &PolicyEvidence{}}
	replaced := Evidence{CollectedAt: now, Policy: &PolicyEvidence{}, Nodes: []NodeFact{
		{Name: "new-0", Pool: "gpu-a", Kubelet: "v1.37.1", Ready: true, GPUAllocatable: 8},
		{Name: "new-1", Pool: "gpu-a", Kubelet: "v1.37.1", Ready: true, GPUAllocatable: 8},
		{Name: "cpu-0", Pool: "cpu", Kubelet: "v1.36.2", Ready: true}}}
	v137 := mustVersion("v1.37")
	if regs := Verify(base, replaced, VerifyOptions{PoolVersions: map[string]skew.Version{"gpu-a": v137}}); len(regs) != 0 {
		t.Errorf("a pool replaced at its planned version has regressions: %+v", regs)
	}
	regs := Verify(base, replaced, VerifyOptions{PoolVersions: map[string]skew.Version{"gpu-A": v137}})
	kinds := map[string]int{}
	for _, r := range regs {
		kinds[r.Kind]++
	}
	if kinds[RegPoolMissing] != 1 || kinds[RegNodeGone] != 2 {
		t.Errorf("a misspelt pool passes: %+v", regs)
	}
	shrunk := replaced
	shrunk.Nodes = shrunk.Nodes[1:]
	regs = Verify(base, shrunk, VerifyOptions{PoolVersions: map[string]skew.Version{"gpu-a": v137}})
	if len(regs) != 1 || regs[0].Kind != RegPoolShrank {
		t.Errorf("a pool that lost a node: %+v", regs)
	}
}

func forbidden(res, verb string) error {
	return apierrorsForbidden(res, verb)
}

// TestDrainsGateSkipsTheRunningWorkflow: the pre-flight a fleet step runs on
// its own management cluster does not count its Argo step pod (an emptyDir
// that a drain refuses) as a blocker, and the gate says it skipped it.
func TestDrainsGateSkipsTheRunningWorkflow(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mgmt-1", Labels: map[string]string{"pool": "system"}}}
	step := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "argo", Name: "ring-r1-preflight-1",
		Labels:          map[string]string{eviction.ArgoWorkflowLabel: "ring-r1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "ring-r1", Controller: ptr(true)}}},
		Spec:   corev1.PodSpec{NodeName: "mgmt-1", Volumes: []corev1.Volume{{Name: "var-run-argo", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	gate := func(self eviction.Self) Gate {
		return (&Runner{Kube: fake.NewClientset(node, step), PoolLabel: "pool", Self: &self}).drainsGate(context.Background())
	}
	if g := gate(eviction.Self{Namespace: "argo", Name: "elsewhere"}); g.Status != StatusFail {
		t.Fatalf("the step pod run from elsewhere: %s %s %v", g.Status, g.Message, g.Evidence)
	}
	g := gate(eviction.Self{Namespace: "argo", Name: "ring-r1-preflight-1"})
	if g.Status != StatusPass || len(g.Evidence) == 0 || !strings.HasPrefix(g.Evidence[0], "skipped 1 pod of the running workflow argo/ring-r1 (ring-r1-preflight-1)") {
		t.Errorf("in the workflow's own pod: %s %s %v", g.Status, g.Message, g.Evidence)
	}
}
