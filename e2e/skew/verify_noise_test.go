//go:build e2e

package skewe2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// registerHook registers a validating webhook for CREATEs of configmaps in
// ns labelled denyLabel=ns, and removes it when the test ends.
func registerHook(t *testing.T, cp *harness.ControlPlane, cfg, hook, ns, url string, ca []byte, ops ...admissionregv1.OperationType) {
	t.Helper()
	if len(ops) == 0 {
		ops = []admissionregv1.OperationType{admissionregv1.Create}
	}
	vwc := &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: cfg},
		Webhooks: []admissionregv1.ValidatingWebhook{{Name: hook,
			ClientConfig:  admissionregv1.WebhookClientConfig{URL: &url, CABundle: ca},
			FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{denyLabel: ns}},
			Rules: []admissionregv1.RuleWithOperations{{Operations: ops,
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}}
	c := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := c.Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cfg, metav1.DeleteOptions{}) })
}

// warningEvent records a Warning event about a kube-system pod of a
// DaemonSet (the pod itself gone, as after a node's replacement).
func warningEvent(t *testing.T, cp *harness.ControlPlane, name, reason, pod string, first, last time.Time) {
	t.Helper()
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Type: corev1.EventTypeWarning, Reason: reason,
		Message: reason + " (e2e)", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: pod},
		FirstTimestamp: metav1.NewTime(first), LastTimestamp: metav1.NewTime(last), Count: 3, Source: corev1.EventSource{Component: "kubelet"}}
	events := cp.Client.CoreV1().Events("kube-system")
	if _, err := events.Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// verifyItems runs verify -o json and returns its items by status, kind
// and object.
func verifyItems(t *testing.T, cp *harness.ControlPlane, args ...string) (map[string]string, int, string) {
	t.Helper()
	r := skew(t, cp, append([]string{"verify", "-o", "json"}, args...)...)
	var vr verifyReport
	decode(t, r, &vr)
	out := map[string]string{}
	for _, it := range vr.Items {
		out[it.Status+" "+it.Kind+" "+it.Object] = it.Message
	}
	return out, r.ExitCode, r.Stdout
}

// A cluster whose only change since the baseline is an upgrade's routine
// noise passes verify: the Warning events kube-system's pods raise while
// they restart, a denial now named after the other of two webhooks that
// deny the same probe (their answers race), and the new release's own
// bootstrap role and binding. What is not routine still fails: an event
// reason an upgrade does not cause, and settling noise that keeps firing
// past --settle-time.
func TestVerifyRoutineUpgradeNoise(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	ns := cp.Namespace(t)
	a, b := startPolicyWebhook(t, false), startPolicyWebhook(t, false)
	a.delay.Store(400) // b answers first at the baseline
	registerHook(t, cp, "e2e-noise-a-"+ns, "a.noise.e2e.gpufleet.dev", ns, a.url, a.ca)
	registerHook(t, cp, "e2e-noise-b-"+ns, "b.noise.e2e.gpufleet.dev", ns, b.url, b.ca)
	waitDenied(t, cp, "the webhooks deny", ns, false, true)

	base := filepath.Join(t.TempDir(), "before.yaml")
	g, _, _ := preflight(t, cp, "admission-probes", "--target", "v1.37", "--save", base)
	if !evidenceHas(g, "validating webhook b.noise.e2e.gpufleet.dev", "denied 1 of 1") ||
		!evidenceHas(g, "validating webhook a.noise.e2e.gpufleet.dev", "denied first by another control (recorded") {
		t.Fatalf("baseline: %s %s\n%s", g.Status, g.Message, strings.Join(g.Evidence, "\n"))
	}

	// The upgrade's noise.
	b.delay.Store(400) // now a answers first
	a.delay.Store(0)
	// Each fired for 3s after the baseline (the kubelet's counts and
	// timestamps of a real restart).
	now := time.Now()
	for i, reason := range []string{"BackOff", "Unhealthy", "FailedCreatePodSandBox", "NetworkNotReady"} {
		pod := []string{"kube-proxy-x7q2w", "kube-proxy-9vmnc", "kube-proxy-b4k8z", "kube-proxy-xxl5d"}[i]
		warningEvent(t, cp, "e2e-noise-"+ns+"-"+strings.ToLower(reason), reason, pod, now, now.Add(3*time.Second))
	}
	role := "system:controller:e2e-noise-" + ns
	defaults := map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	crs, crbs := cp.Client.RbacV1().ClusterRoles(), cp.Client.RbacV1().ClusterRoleBindings()
	if _, err := crs.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role, Labels: defaults},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crs.Delete(context.Background(), role, metav1.DeleteOptions{}) })
	if _, err := crbs.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role, Labels: defaults},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "e2e-noise"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crbs.Delete(context.Background(), role, metav1.DeleteOptions{}) })

	got, code, out := verifyItems(t, cp, "--baseline", base)
	for k, msg := range got {
		bad := strings.HasPrefix(k, "fail ") || strings.HasPrefix(k, "unknown ")
		if bad && (strings.Contains(k, " kube-system-warnings ") || strings.Contains(k, " admission-") || strings.Contains(k, " rbac-grant ")) {
			t.Errorf("routine noise reported: %s: %s", k, msg)
		}
	}
	if _, ok := got["warn kube-system-warnings daemonset/kube-proxy"]; !ok {
		t.Errorf("the restarts are not listed as settling\n%s", out)
	}
	t.Logf("verify of routine noise: exit %d", code)

	// Not routine: a reason an upgrade does not cause, and noise that
	// keeps firing past the settle time.
	warningEvent(t, cp, "e2e-noise-"+ns+"-failedcreate", "FailedCreate", "coredns-5d78c9869d-q8vzb", now, now)
	got, code, out = verifyItems(t, cp, "--baseline", base, "--settle-time", "1s")
	if m := got["fail kube-system-warnings deployment/coredns"]; !strings.Contains(m, "new Warning event in kube-system: FailedCreate") {
		t.Errorf("a reason an upgrade does not cause: %q %v\n%s", m, keys(got), out)
	}
	if m := got["fail kube-system-warnings daemonset/kube-proxy"]; !strings.Contains(m, "still firing") {
		t.Errorf("noise past --settle-time: %q\n%s", m, out)
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}

// kubeletServingCSR creates a kubelet serving certificate request as a
// reinstalled node's kubelet would (signer kubernetes.io/kubelet-serving),
// which no controller of core Kubernetes approves.
func kubeletServingCSR(t *testing.T, cp *harness.ControlPlane, node string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, DNSNames: []string{node}}, key)
	if err != nil {
		t.Fatal(err)
	}
	name := "e2e-serving-" + node
	csrs := cp.Client.CertificatesV1().CertificateSigningRequests()
	if _, err := csrs.Create(context.Background(), &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = csrs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// Each way a control can be weakened without being deleted is caught by
// verify, naming the control: a webhook's failurePolicy turned Ignore and
// an operation other than CREATE dropped, a policy binding's
// matchResources narrowed, a RuntimeClass added that Pod Security's configuration exempts
// (the apiserver's exempt list names it), new grants of namespace patch,
// nodes/proxy and serviceaccounts/token create and any grant to the
// anonymous user, and a kubelet serving certificate request nobody
// approves.
func TestVerifyCatchesWeakenedControls(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	f := newPolicyFixture(t, cp)
	hook := startPolicyWebhook(t, false)
	cfg := "e2e-weak-" + f.ns
	registerHook(t, cp, cfg, "weak.e2e.gpufleet.dev", f.ns, hook.url, hook.ca, admissionregv1.Create, admissionregv1.Update)
	waitDenied(t, cp, "the webhook denies", f.ns, false, true)

	base := filepath.Join(t.TempDir(), "before.yaml")
	if g, _, _ := preflight(t, cp, "admission-probes", "--target", "v1.37", "--save", base); g.Status == "unknown" {
		t.Fatalf("baseline: %s %s\n%s", g.Status, g.Message, strings.Join(g.Evidence, "\n"))
	}

	// Weaken every control.
	vwcs := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	w, err := vwcs.Get(ctx, cfg, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Webhooks[0].FailurePolicy = ptr.To(admissionregv1.Ignore)
	w.Webhooks[0].Rules[0].Operations = []admissionregv1.OperationType{admissionregv1.Create}
	if _, err := vwcs.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindings := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	bd, err := bindings.Get(ctx, f.policy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bd.Spec.MatchResources.NamespaceSelector.MatchLabels["e2e.gpufleet.dev/strict"] = "true"
	if _, err := bindings.Update(ctx, bd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rcs := cp.Client.NodeV1().RuntimeClasses()
	if _, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-e2e-exempt"}, Handler: "nvidia"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rcs.Delete(context.Background(), "gpufleet-e2e-exempt", metav1.DeleteOptions{}) })
	crs := cp.Client.RbacV1().ClusterRoles()
	risky := "e2e-risky-" + f.ns
	if _, err := crs.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: risky}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crs.Delete(context.Background(), risky, metav1.DeleteOptions{}) })
	crbs := cp.Client.RbacV1().ClusterRoleBindings()
	for _, b := range []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: risky}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: risky},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "e2e-oncall-" + f.ns}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-anon-" + f.ns}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"}}},
	} {
		if _, err := crbs.Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := b.Name
		t.Cleanup(func() { _ = crbs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	// A node the upgrade reinstalled asks for a serving certificate; a
	// request of a node that no longer exists is no regression.
	nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("no node to ask for a serving certificate")
	}
	csr := kubeletServingCSR(t, cp, nodes.Items[0].Name)
	if err := harness.Eventually(ctx, "the exempt RuntimeClass is admitted", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().Pods(f.psaNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "e2e-wait"},
			Spec: corev1.PodSpec{RuntimeClassName: ptr.To("gpufleet-e2e-exempt"), Containers: []corev1.Container{{Name: "c", Image: harness.PauseImage,
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}

	got, code, out := verifyItems(t, cp, "--baseline", base, "--settle-time", "1ms")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for want, says := range map[string]string{
		"fail admission-config validatingwebhookconfiguration/" + cfg: "failurePolicy Ignore, was Fail",
		"fail admission-config validatingadmissionpolicy/" + f.policy: "no longer selects namespace " + f.ns,
		"fail admission-probe runtimeclass/gpufleet-e2e-exempt":       "RuntimeClass gpufleet-e2e-exempt, new since the baseline, is admitted",
		"fail rbac-grant clusterrolebinding/" + risky:                 "namespace modification",
		"fail rbac-grant clusterrolebinding/e2e-anon-" + f.ns:         "anyone who can reach the apiserver",
		"fail certificate csr/" + csr:                                 "kubelet serving certificate request " + csr,
	} {
		if m, ok := got[want]; !ok || !strings.Contains(m, says) {
			t.Errorf("%s: %q, want it to say %q", want, m, says)
		}
	}
	if m := got["fail admission-config validatingwebhookconfiguration/"+cfg]; !strings.Contains(m, "no longer match UPDATE configmaps/v1") {
		t.Errorf("UPDATE dropped: %q", m)
	}
	for _, path := range []string{"nodes/proxy", "token request"} {
		if m := got["fail rbac-grant clusterrolebinding/"+risky]; !strings.Contains(m, path) {
			t.Errorf("rbac-grant lacks %s: %q", path, m)
		}
	}
	if t.Failed() {
		for k := range got {
			t.Logf("item %s", k)
		}
		t.Logf("verify:\n%s", out)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
