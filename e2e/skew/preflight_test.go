//go:build e2e

package skewe2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

type gateRow struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Message  string   `json:"message"`
	Evidence []string `json:"evidence"`
	Command  string   `json:"command"`
	Severity string   `json:"severity"`
}

type preflightReport struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Target     string    `json:"target"`
	Items      []gateRow `json:"items"`
	Evidence   struct {
		Nodes []struct {
			Name  string `json:"name"`
			Ready bool   `json:"ready"`
		} `json:"nodes"`
		Addons []struct {
			Name, Namespace, Workload, Version, Source string
			Also                                       []string
		} `json:"addons"`
	} `json:"evidence"`
	Summary struct {
		Status string `json:"status"`
	} `json:"summary"`
}

// preflight runs `kubectl skew preflight -o json` and returns the gate.
func preflight(t *testing.T, cp *harness.ControlPlane, gate string, args ...string) (gateRow, preflightReport, plugintest.Result) {
	t.Helper()
	r := skew(t, cp, append([]string{"preflight", "-o", "json"}, args...)...)
	if r.ExitCode != 0 && r.ExitCode != 1 {
		t.Fatalf("exit %d, want 0 or 1\n%s", r.ExitCode, r)
	}
	var rep preflightReport
	decode(t, r, &rep)
	if rep.Kind != "SkewPreflightReport" || rep.APIVersion != "gpufleet.dev/v1alpha3" {
		t.Fatalf("kind %q apiVersion %q", rep.Kind, rep.APIVersion)
	}
	for _, g := range rep.Items {
		if g.Name == gate {
			return g, rep, r
		}
	}
	t.Fatalf("no gate %s\n%s", gate, r)
	return gateRow{}, rep, r
}

func evidenceHas(g gateRow, subs ...string) bool {
	for _, e := range g.Evidence {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(e, s)
		}
		if ok {
			return true
		}
	}
	return false
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A DeviceClass written through resource.k8s.io/v1beta1, which 1.38
// removes: the removed-APIs gate (pkg/deprecations' object writers) fails.
func TestPreflightRemovedAPIInUse(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	rc := cp.Client.Discovery().RESTClient()
	name := fmt.Sprintf("pf-legacy-%d", time.Now().UnixNano()%100000)
	body := fmt.Sprintf(`{"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceClass","metadata":{"name":%q,"labels":{"team":"legacy"}},"spec":{}}`, name)
	if _, err := rc.Post().AbsPath("/apis/resource.k8s.io/v1beta1/deviceclasses").Param("fieldManager", "pf-legacy-writer").
		SetHeader("Content-Type", "application/json").Body([]byte(body)).DoRaw(ctx); err != nil {
		t.Fatalf("create DeviceClass through v1beta1: %v", err)
	}
	t.Cleanup(func() {
		_, _ = rc.Delete().AbsPath("/apis/resource.k8s.io/v1/deviceclasses/" + name).DoRaw(context.Background())
	})
	g, _, r := preflight(t, cp, "removed-apis", "--target", "v1.38")
	if g.Status != "fail" || !evidenceHas(g, "resource.k8s.io/v1beta1", name) {
		t.Errorf("removed-apis = %s %s\n%s", g.Status, g.Message, r)
	}
	if r.ExitCode != 1 || !strings.Contains(g.Command, "kubectl deprecations --target v1.38") {
		t.Errorf("exit %d command %q", r.ExitCode, g.Command)
	}
}

// A validating webhook with failurePolicy Fail whose Service has no
// endpoint: the webhooks gate fails and names it.
func TestPreflightWebhookFailClosed(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	ns := cp.Namespace(t)
	if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "policy-hook"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	name := "pf-" + ns
	// It only matches its own namespace, so the rest of the suite is untouched.
	vwc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: "deny.gpufleet.dev", FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:      admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: ns, Name: "policy-hook", Port: ptr.To[int32](443)}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	g, _, r := preflight(t, cp, "webhooks", "--target", "v1.37")
	if g.Status != "fail" || !evidenceHas(g, name, "no ready endpoints") || !strings.Contains(g.Command, "kubernetes.io/service-name=policy-hook") {
		t.Errorf("webhooks = %s %s %q\n%s", g.Status, g.Message, g.Command, r)
	}
	if r.ExitCode != 1 {
		t.Errorf("exit %d, want 1", r.ExitCode)
	}
}

// A namespace whose Pod Security enforce-version is latest warns.
func TestPreflightPSALatest(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	ns := cp.Namespace(t)
	patch := `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline","pod-security.kubernetes.io/enforce-version":"latest"}}}`
	if _, err := cp.Client.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	g, _, r := preflight(t, cp, "pod-security-latest", "--target", "v1.37", "--fail-on", "warning")
	if g.Status != "warn" || !evidenceHas(g, "namespace "+ns, "latest") || !strings.Contains(g.Command, "enforce-version=v1.37") {
		t.Errorf("pod-security-latest = %s %s\n%s", g.Status, g.Message, r)
	}
	if r.ExitCode != 1 {
		t.Errorf("exit %d with --fail-on warning, want 1", r.ExitCode)
	}
}

// cert-manager 1.18 supports Kubernetes 1.29-1.33 (cert-manager.io/docs/releases):
// the addons gate fails for 1.37 and names the release to move to.
func TestPreflightAddonOutsideWindow(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	ns := cp.Namespace(t)
	lbl := map[string]string{"app": "cert-manager"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager", Labels: lbl},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "quay.io/jetstack/cert-manager-controller:v1.18.2"}}}}}}
	if _, err := cp.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g, rep, r := preflight(t, cp, "addons", "--target", "v1.37")
	if g.Status != "fail" || !evidenceHas(g, "FAIL: cert-manager "+ns+"/deployment/cert-manager (v1.18.2)", "not 1.37") {
		t.Errorf("addons = %s %s\n%s", g.Status, g.Message, r)
	}
	// kube-proxy and CoreDNS of the kubeadm-like scenario are in the inventory too.
	found := map[string]bool{}
	for _, a := range rep.Evidence.Addons {
		found[a.Name] = true
	}
	if !found["kube-proxy"] || !found["coredns"] || !found["cert-manager"] {
		t.Errorf("addon inventory %+v", rep.Evidence.Addons)
	}
}

// The GPU stack as its projects publish it (NVIDIA/gpu-operator v26.7.0
// values.yaml: operator and validator nvcr.io/nvidia/gpu-operator, device
// plugin nvcr.io/nvidia/k8s-device-plugin; Kueue's released
// registry.k8s.io/kueue/kueue behind a kube-rbac-proxy sidecar), found by
// image in their own namespaces and judged against 1.37: GPU Operator
// 25.10 stops at 1.35 and no release of the table reaches 1.37
// (platform-support page), the device plugin states >= 1.10 and Kueue 0.14
// >= 1.29. The validator, on the operator's image, is the same addon, not a
// second one.
func TestPreflightGPUStackAddons(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	ns := cp.Namespace(t)
	nowhere := map[string]string{"gpufleet.dev/e2e-nowhere": "true"}
	tmpl := func(app string, cs ...corev1.Container) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: corev1.PodSpec{NodeSelector: nowhere, Containers: cs}}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	for _, d := range []*appsv1.Deployment{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel("gpu-operator"),
			Template: tmpl("gpu-operator", corev1.Container{Name: "gpu-operator", Image: "nvcr.io/nvidia/gpu-operator:v25.10.1"})}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kueue-controller-manager"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel("kueue"),
			Template: tmpl("kueue", corev1.Container{Name: "kube-rbac-proxy", Image: "registry.k8s.io/kubebuilder/kube-rbac-proxy:v0.16.0"},
				corev1.Container{Name: "manager", Image: "registry.k8s.io/kueue/kueue:v0.14.1"})}},
	} {
		if _, err := cp.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*appsv1.DaemonSet{
		{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-operator-validator"}, Spec: appsv1.DaemonSetSpec{Selector: sel("validator"),
			Template: tmpl("validator", corev1.Container{Name: "nvidia-operator-validator", Image: "nvcr.io/nvidia/gpu-operator:v25.10.1"})}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-device-plugin-daemonset"}, Spec: appsv1.DaemonSetSpec{Selector: sel("nvidia-device-plugin-daemonset"),
			Template: tmpl("nvidia-device-plugin-daemonset", corev1.Container{Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"})}},
	} {
		if _, err := cp.Client.AppsV1().DaemonSets(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g, rep, r := preflight(t, cp, "addons", "--target", "v1.37")
	for _, want := range [][]string{
		{"FAIL: nvidia-gpu-operator " + ns + "/deployment/gpu-operator (v25.10.1)", "supports Kubernetes 1.30..1.35, not 1.37: no release in the table", "platform-support"},
		{"PASS: nvidia-device-plugin " + ns + "/daemonset/nvidia-device-plugin-daemonset (v0.18.1)", "1.10 or newer"},
		{"PASS: kueue " + ns + "/deployment/kueue-controller-manager (v0.14.1)", "1.29 or newer"},
	} {
		if !evidenceHas(g, want...) {
			t.Errorf("addons evidence lacks %q\n%s", want, r)
		}
	}
	if g.Status != "fail" {
		t.Errorf("addons = %s %s", g.Status, g.Message)
	}
	found := 0
	for _, a := range rep.Evidence.Addons {
		if a.Namespace != ns {
			continue
		}
		found++
		if a.Source != "image" || (a.Name == "nvidia-gpu-operator" && (a.Workload != "deployment/gpu-operator" || len(a.Also) != 1)) {
			t.Errorf("addon %+v", a)
		}
	}
	if found != 3 {
		t.Errorf("%d addons in %s, want the operator, the device plugin and Kueue: %+v", found, ns, rep.Evidence.Addons)
	}
}

// A CRD whose storage moved from v1 to v2 keeps v1 in storedVersions.
func TestPreflightCRDNeedsMigration(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	crd := harness.MultiVersionCRD("preflight.gpufleet.dev", "Gadget", "gadgets", []string{"v1", "v2"}, "v1")
	if err := cp.ApplyCRDs(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	err := harness.Eventually(ctx, "storage moved to v2", time.Minute, func(ctx context.Context) (bool, error) {
		got, err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i := range got.Spec.Versions {
			got.Spec.Versions[i].Storage = got.Spec.Versions[i].Name == "v2"
		}
		got, err = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			return false, nil
		}
		return len(got.Status.StoredVersions) == 2, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g, _, r := preflight(t, cp, "crd-storage", "--target", "v1.37")
	if g.Status != "warn" || !evidenceHas(g, crd.Name, "storedVersions v1,v2", "storage version v2") || !strings.Contains(g.Command, "kubectl crd-migrate run") {
		t.Errorf("crd-storage = %s %s %q\n%s", g.Status, g.Message, g.Command, r)
	}
}

// One replica under a PDB with minAvailable 1: draining its pool blocks.
func TestPreflightBlockedDrain(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	ns := cp.Namespace(t)
	poolName := "pf-drain"
	if _, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: poolName, Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), poolName+"-0", metav1.DeleteOptions{})
	})
	d := harness.Deployment(ns, "trainer", 1, 0)
	d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: poolName}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "trainer", "trainer", 1), 1); err != nil {
		t.Fatal(err)
	}
	g, _, r := preflight(t, cp, "drains", "--target", "v1.37")
	if g.Status != "fail" || !evidenceHas(g, "pool "+poolName, "1 pod blocked", ns+"/trainer-") || !strings.Contains(g.Command, "kubectl pdb-blockers -l "+harness.PoolLabel+"=") {
		t.Errorf("drains = %s %s %q\n%s", g.Status, g.Message, g.Command, r)
	}
}

// A node nobody manages (no kubelet, no KWOK) has no Ready condition.
func TestPreflightNotReadyNode(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	n := harness.GPUNode("pf-ghost-0", harness.GPUPool{Name: "pf-ghost"}, "pf-ghost-rs0")
	delete(n.Annotations, harness.KwokNodeAnnotation)
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	g, _, r := preflight(t, cp, "nodes-ready", "--target", "v1.37")
	if g.Status != "fail" || !evidenceHas(g, "node pf-ghost-0 (pool pf-ghost) not Ready") || !strings.Contains(g.Command, "kubectl describe node pf-ghost-0") {
		t.Errorf("nodes-ready = %s %s %q\n%s", g.Status, g.Message, g.Command, r)
	}
}

type verifyReport struct {
	Kind  string `json:"kind"`
	Items []struct {
		Status  string `json:"status"`
		Kind    string `json:"kind"`
		Object  string `json:"object"`
		Message string `json:"message"`
	} `json:"items"`
}

// verify against a saved baseline: a node of a pool planned at 1.37 that
// came back on 1.36, and a kube-system pod that started crash-looping.
func TestVerifyAgainstBaseline(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	poolName := "pf-verify"
	if _, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: poolName, Nodes: 1, KubeletVersion: "v1.36.4"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), poolName+"-0", metav1.DeleteOptions{})
	})
	// A kube-system pod on a node no kubelet or KWOK manages, so only this
	// test writes its status.
	ghost := harness.GPUNode("pf-verify-ghost", harness.GPUPool{Name: "pf-verify-ghost"}, "rs0")
	delete(ghost.Annotations, harness.KwokNodeAnnotation)
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), ghost.Name, metav1.DeleteOptions{})
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pf-verify-agent", Namespace: "kube-system"},
		Spec: corev1.PodSpec{NodeName: ghost.Name, Containers: []corev1.Container{{Name: "agent", Image: harness.PauseImage}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
	pod, err := cp.Client.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Pods("kube-system").Delete(context.Background(), "pf-verify-agent", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", Image: harness.PauseImage, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
	if _, err = cp.Client.CoreV1().Pods("kube-system").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	base := filepath.Join(t.TempDir(), "before.yaml")
	if r := skew(t, cp, "preflight", "--target", "v1.37", "--save", base, "-q"); r.ExitCode != 0 && r.ExitCode != 1 {
		t.Fatalf("preflight --save: exit %d\n%s", r.ExitCode, r)
	}
	if b, err := os.ReadFile(base); err != nil || !strings.Contains(string(b), "kind: SkewPreflightReport") || !strings.Contains(string(b), "pf-verify-agent") {
		t.Fatalf("saved baseline: %v\n%s", err, b)
	}
	// Nothing changed yet: no regression about this test's objects.
	clean := skew(t, cp, "verify", "--baseline", base, "-o", "json")
	var cr verifyReport
	decode(t, clean, &cr)
	for _, it := range cr.Items {
		if strings.Contains(it.Object, "pf-verify") {
			t.Errorf("regression before anything changed: %+v", it)
		}
	}

	// The node lifecycle controller may write the pod's conditions too.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cp.Client.CoreV1().Pods("kube-system").Get(ctx, "pf-verify-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Image: harness.PauseImage, RestartCount: 5,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}}}}
		_, err = cp.Client.CoreV1().Pods("kube-system").UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r := skew(t, cp, "verify", "--baseline", base, "--pool", poolName+"=v1.37", "-o", "json")
	if r.ExitCode != 1 {
		t.Fatalf("verify exit %d, want 1\n%s", r.ExitCode, r)
	}
	var vr verifyReport
	decode(t, r, &vr)
	got := map[string]bool{}
	for _, it := range vr.Items {
		got[it.Kind+" "+it.Object] = true
	}
	for _, want := range []string{"node-version node/" + poolName + "-0", "kube-system-pod pod/kube-system/pf-verify-agent"} {
		if !got[want] {
			t.Errorf("no regression %q\n%s", want, r)
		}
	}
}
