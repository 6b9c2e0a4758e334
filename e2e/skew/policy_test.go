//go:build e2e

package skewe2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
)

// denyLabel marks the objects the test's webhook denies; its value is the
// namespace, so the webhook's selectors match nothing of another test.
const denyLabel = "e2e.gpufleet.dev/deny"

// policyWebhook is a validating admission webhook served by the test over
// TLS. It denies every object that carries denyLabel, or hangs until the
// request is abandoned when hang is set. It counts the reviews it got
// and the ones that were not dry runs.
type policyWebhook struct {
	srv   *httptest.Server
	url   string
	ca    []byte
	hang  bool
	mu    sync.Mutex
	seen  int
	wet   int
	block chan struct{}
	// delay (milliseconds) holds every answer back: the apiserver calls
	// validating webhooks in parallel and names the first denial to
	// arrive, so delays decide which of two it names.
	delay atomic.Int64
}

func startPolicyWebhook(t *testing.T, hang bool) *policyWebhook {
	t.Helper()
	w := &policyWebhook{hang: hang, block: make(chan struct{})}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, "bad review", http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.seen++
		if review.Request.DryRun == nil || !*review.Request.DryRun {
			w.wet++
		}
		w.mu.Unlock()
		if w.hang {
			select {
			case <-req.Context().Done():
			case <-w.block:
			}
			return
		}
		select {
		case <-time.After(time.Duration(w.delay.Load()) * time.Millisecond):
		case <-req.Context().Done():
			return
		}
		var obj metav1.PartialObjectMetadata
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if _, ok := obj.Labels[denyLabel]; ok {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "objects labelled " + denyLabel + " are not allowed here"}
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(rw).Encode(review)
	}))
	w.srv.StartTLS()
	w.url = w.srv.URL + "/validate"
	w.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	t.Cleanup(func() {
		close(w.block)
		w.srv.Close()
	})
	return w
}

// register adds a validating webhook for CREATEs of configmaps in ns that
// carry denyLabel=ns (failurePolicy Fail, sideEffects None).
func (w *policyWebhook) register(t *testing.T, cp *harness.ControlPlane, name, ns string, timeout int32) {
	t.Helper()
	vwc := &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.ValidatingWebhook{{Name: "deny.policy.e2e.gpufleet.dev",
			ClientConfig:  admissionregv1.WebhookClientConfig{URL: &w.url, CABundle: w.ca},
			FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To(timeout),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{denyLabel: ns}},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}}
	c := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := c.Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// dryRun sends what the probes send, to wait for the apiserver to apply a
// change of policy (its admission plugins read configuration from caches).
func dryRunDenied(ctx context.Context, cp *harness.ControlPlane, ns string, pod bool) (bool, error) {
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var err error
	if pod {
		_, err = cp.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "e2e-wait"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: harness.PauseImage,
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}, opts)
	} else {
		_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e2e-wait", Labels: map[string]string{denyLabel: ns}}}, opts)
	}
	return err != nil, nil
}

func waitDenied(t *testing.T, cp *harness.ControlPlane, what, ns string, pod, want bool) {
	t.Helper()
	if err := harness.Eventually(ctxT(t), what, time.Minute, func(ctx context.Context) (bool, error) {
		denied, err := dryRunDenied(ctx, cp, ns, pod)
		return denied == want, err
	}); err != nil {
		t.Fatal(err)
	}
}

// policyFixture: a namespace that enforces Pod Security restricted, and a
// namespace guarded by the test's webhook (configmaps labelled denyLabel)
// and by a ValidatingAdmissionPolicy that denies pods whose images are not
// pinned by digest, with a user who may view it.
type policyFixture struct {
	psaNS, ns, hook, policy, viewer string
	webhook                         *policyWebhook
}

func newPolicyFixture(t *testing.T, cp *harness.ControlPlane) policyFixture {
	t.Helper()
	ctx := ctxT(t)
	f := policyFixture{psaNS: cp.Namespace(t), ns: cp.Namespace(t)}
	patch := `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"v1.37"}}}`
	if _, err := cp.Client.CoreV1().Namespaces().Patch(ctx, f.psaNS, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.hook = "e2e-policy-" + f.ns
	f.webhook = startPolicyWebhook(t, false)
	f.webhook.register(t, cp, f.hook, f.ns, 5)

	f.policy = "e2e-digests-" + f.ns
	vaps := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if _, err := vaps.Create(ctx, &admissionregv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.policy},
		Spec: admissionregv1.ValidatingAdmissionPolicySpec{FailurePolicy: ptr.To(admissionregv1.Fail),
			MatchConstraints: &admissionregv1.MatchResources{ResourceRules: []admissionregv1.NamedRuleWithOperations{{RuleWithOperations: admissionregv1.RuleWithOperations{
				Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule:       admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionregv1.Validation{{Expression: "object.spec.containers.all(c, c.image.contains('@sha256:'))", Message: "images must be pinned by digest"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vaps.Delete(context.Background(), f.policy, metav1.DeleteOptions{}) })
	bindings := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := bindings.Create(ctx, &admissionregv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: f.policy},
		Spec: admissionregv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: f.policy, ValidationActions: []admissionregv1.ValidationAction{admissionregv1.Deny},
			MatchResources: &admissionregv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.ns}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(context.Background(), f.policy, metav1.DeleteOptions{}) })

	f.viewer = "e2e-viewer-" + f.ns
	rbs := cp.Client.RbacV1().RoleBindings(f.ns)
	if _, err := rbs.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: f.viewer}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDenied(t, cp, "Pod Security denies", f.psaNS, true, true)
	waitDenied(t, cp, "the webhook denies", f.ns, false, true)
	waitDenied(t, cp, "the policy denies", f.ns, true, true)
	return f
}

// probeFile is the documented --probe-file example: a pod running an
// image that the cluster's image policy must refuse.
func probeFile(t *testing.T, ns string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "unsigned-pod.yaml")
	body := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: unsigned-image\n  namespace: " + ns + "\nspec:\n  containers:\n  - name: app\n    image: registry.example.com/team/app:unsigned\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// objectCounts counts, in each namespace, every kind the probes create.
func objectCounts(t *testing.T, cp *harness.ControlPlane, nss ...string) map[string]int {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]int{}
	for _, ns := range nss {
		add := func(kind string, n int, err error) {
			if err != nil {
				t.Fatal(err)
			}
			out[ns+" "+kind] = n
		}
		p, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		add("pods", len(p.Items), err)
		c, err := cp.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		add("configmaps", len(c.Items), err)
		s, err := cp.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		add("secrets", len(s.Items), err)
		d, err := cp.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		add("deployments", len(d.Items), err)
		r, err := cp.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		add("replicasets", len(r.Items), err)
		j, err := cp.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		add("jobs", len(j.Items), err)
	}
	named, err := cp.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=gpufleet-policy-probe"})
	if err != nil {
		t.Fatal(err)
	}
	out["probe pods anywhere"] = len(named.Items)
	return out
}

var policyKinds = map[string]bool{"admission-probe": true, "rbac-grant": true, "pod-security-pin": true, "certificate": true, "image-pin": true, "policy-unread": true, "patch-level": true}

// Each security control is broken between the baseline and verify, and
// verify names each; before that, verify of the unchanged cluster is
// clean; no probe ever stores an object.
func TestPolicyContinuity(t *testing.T) {
	cp := scenario(t)
	f := newPolicyFixture(t, cp)
	probes := probeFile(t, f.ns)
	before := objectCounts(t, cp, f.psaNS, f.ns)
	mark := harness.AuditLines(t, cp.AuditLogPath)

	base := filepath.Join(t.TempDir(), "before.yaml")
	g, rep, r := preflight(t, cp, "admission-probes", "--target", "v1.37", "--save", base, "--probe-file", probes)
	for _, want := range [][]string{
		{"namespace " + f.psaNS + " (Pod Security enforce=restricted, version v1.37): denied 2 of 2"},
		{"validating webhook deny.policy.e2e.gpufleet.dev (validatingwebhookconfiguration " + f.hook + "): denied 1 of 1"},
		{"ValidatingAdmissionPolicy " + f.policy + " (binding " + f.policy + "): denied 3 of 3"},
		{"probe file unsigned-pod.yaml#1 (Pod unsigned-image): denied 1 of 1"},
	} {
		if !evidenceHas(g, want...) {
			t.Errorf("admission-probes lacks %q: %s %s\n%s", want, g.Status, g.Message, strings.Join(g.Evidence, "\n"))
		}
	}
	for _, it := range rep.Items {
		if it.Name == "rbac" && (it.Status == "unknown" || !strings.Contains(it.Message, "recorded")) {
			t.Errorf("rbac: %s %s", it.Status, it.Message)
		}
	}

	clean := skew(t, cp, "verify", "--baseline", base, "-o", "json")
	var cr verifyReport
	decode(t, clean, &cr)
	for _, it := range cr.Items {
		if policyKinds[it.Kind] {
			t.Errorf("verify of the unchanged cluster: %+v", it)
		}
	}

	// Break every control.
	ctx := ctxT(t)
	if _, err := cp.Client.CoreV1().Namespaces().Patch(ctx, f.psaNS, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, f.hook, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bindings := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	b, err := bindings.Get(ctx, f.policy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.ValidationActions = []admissionregv1.ValidationAction{admissionregv1.Audit}
	if _, err := bindings.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	leaky := "e2e-secrets-" + f.ns
	crs := cp.Client.RbacV1().ClusterRoles()
	if _, err := crs.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: leaky, Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crs.Delete(context.Background(), leaky, metav1.DeleteOptions{}) })
	waitDenied(t, cp, "Pod Security no longer enforced", f.psaNS, true, false)
	waitDenied(t, cp, "the webhook gone", f.ns, false, false)
	if err := harness.Eventually(ctx, "the aggregation controller adds secrets to view", time.Minute, func(ctx context.Context) (bool, error) {
		v, err := crs.Get(ctx, "view", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, r := range v.Rules {
			for _, res := range r.Resources {
				if res == "secrets" {
					return true, nil
				}
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The binding's Audit takes effect when the apiserver's policy cache
	// catches up: a probe pod that only the policy denied goes through.
	if err := harness.Eventually(ctx, "the policy only audits", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().Pods(f.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "e2e-wait"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: harness.PauseImage}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}

	r = skew(t, cp, "verify", "--baseline", base, "-o", "json")
	if r.ExitCode != 1 {
		t.Fatalf("verify after breaking every control: exit %d, want 1\n%s", r.ExitCode, r)
	}
	var vr verifyReport
	decode(t, r, &vr)
	got := map[string]string{}
	for _, it := range vr.Items {
		got[it.Status+" "+it.Kind+" "+it.Object] = it.Message
	}
	for _, want := range []string{
		"fail admission-probe namespace/" + f.psaNS,
		"fail admission-probe validatingwebhookconfiguration/" + f.hook,
		"fail admission-probe validatingadmissionpolicy/" + f.policy,
		"fail admission-probe probe-file/unsigned-pod.yaml#1",
		"fail rbac-grant clusterrole/view",
		"fail rbac-grant rolebinding/" + f.ns + "/viewers",
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("verify did not report %q\n%s", want, r.Stdout)
		}
	}
	if m := got["fail rbac-grant clusterrole/view"]; !strings.Contains(m, "from ClusterRole "+leaky) || !strings.Contains(m, "secrets") {
		t.Errorf("view's new rules: %q", m)
	}
	if m := got["fail admission-probe namespace/"+f.psaNS]; !strings.Contains(m, "admits it now") {
		t.Errorf("Pod Security: %q", m)
	}
	// The table an on-call engineer reads fits 120 columns; -o wide has
	// every message whole.
	tbl := skew(t, cp, "verify", "--baseline", base, "--color", "never")
	if tbl.ExitCode != 1 || !strings.Contains(tbl.Stdout, "admission-probe") {
		t.Errorf("verify table: exit %d\n%s", tbl.ExitCode, tbl)
	}
	goldenfile.CheckFits(t, tbl.Stdout, cli.DefaultTableWidth)
	t.Logf("verify after breaking every control:\n%s", tbl.Stdout)
	if w := skew(t, cp, "verify", "--baseline", base, "--color", "never", "-o", "wide"); !strings.Contains(w.Stdout, "ValidatingAdmissionPolicy "+f.policy+" (binding "+f.policy+") denied a pods probe") {
		t.Errorf("verify -o wide: exit %d\n%s", w.ExitCode, w)
	}

	// Nothing was stored, and every create the plugin sent was a dry run.
	time.Sleep(time.Second) // the audit log is written asynchronously
	if after := objectCounts(t, cp, f.psaNS, f.ns); !equalCounts(before, after) {
		t.Errorf("objects before %v, after %v", before, after)
	}
	creates := 0
	for _, e := range harness.AuditEvents(t, cp.AuditLogPath, mark, "kubectl-skew/") {
		if e.Verb != "create" {
			continue
		}
		creates++
		if !strings.Contains(e.RequestURI, "dryRun=All") {
			t.Errorf("a create that is not a dry run: %s", e.RequestURI)
		}
	}
	if creates < 14 {
		t.Errorf("%d dry-run creates audited, want at least the 7 probes of the baseline and the 7 of verify", creates)
	}
	f.webhook.mu.Lock()
	defer f.webhook.mu.Unlock()
	if f.webhook.seen == 0 || f.webhook.wet > 0 {
		t.Errorf("the webhook got %d reviews, %d of them not dry runs", f.webhook.seen, f.webhook.wet)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Bad input: a probe file that does not parse, a webhook that hangs on
// the dry run, a user who may not create in a namespace. Each is one line
// of the admission-probes gate (UNKNOWN, never PASS); every gate runs.
func TestPolicyBadInput(t *testing.T) {
	cp := scenario(t)
	ctx := ctxT(t)
	f := newPolicyFixture(t, cp)
	hangNS := cp.Namespace(t)
	hung := startPolicyWebhook(t, true)
	hook := "e2e-hang-" + hangNS
	hung.register(t, cp, hook, hangNS, 30)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	g, rep, r := preflight(t, cp, "admission-probes", "--target", "v1.37", "--request-timeout", "3s", "--probe-file", bad)
	took := time.Since(start)
	if g.Status != "unknown" || !evidenceHas(g, "UNKNOWN validating webhook deny.policy.e2e.gpufleet.dev (validatingwebhookconfiguration "+hook+")") ||
		!evidenceHas(g, "UNKNOWN probe file "+bad+": document 1:") || !evidenceHas(g, "namespace "+f.psaNS, "denied 2 of 2") {
		t.Errorf("admission-probes: %s %s\n%s", g.Status, g.Message, strings.Join(g.Evidence, "\n"))
	}
	for _, e := range g.Evidence {
		if strings.Contains(e, hook) && !strings.Contains(e, "request timeout") && !strings.Contains(e, "failed calling webhook") {
			t.Errorf("the hung webhook's line says neither: %s", e)
		}
	}
	if len(rep.Items) < 17 || took > 25*time.Second {
		t.Errorf("%d gates in %s\n%s", len(rep.Items), took, r)
	}

	// A user who can read everything and create only in the Pod Security
	// namespace (deploy/rbac/skew-probes.yaml bound there).
	user := "e2e-reader-" + f.ns
	crs, crbs := cp.Client.RbacV1().ClusterRoles(), cp.Client.RbacV1().ClusterRoleBindings()
	if _, err := crs.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}, {NonResourceURLs: []string{"*"}, Verbs: []string{"get"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crs.Delete(context.Background(), user, metav1.DeleteOptions{}) })
	if _, err := crbs.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}, Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crbs.Delete(context.Background(), user, metav1.DeleteOptions{}) })
	probes := shippedProbeRole(t)
	probes.Name = "e2e-probes-" + f.ns
	if _, err := crs.Create(ctx, probes, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crs.Delete(context.Background(), probes.Name, metav1.DeleteOptions{}) })
	if _, err := cp.Client.RbacV1().RoleBindings(f.psaNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "probes"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: probes.Name}, Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g, rep, r = preflight(t, cp, "admission-probes", "--target", "v1.37", "--as", user)
	if g.Status != "unknown" || !evidenceHas(g, "forbidden: cannot create configmaps in namespace "+f.ns) || !evidenceHas(g, "forbidden: cannot create pods in namespace "+f.ns) ||
		!evidenceHas(g, "namespace "+f.psaNS, "denied 2 of 2") || !strings.Contains(g.Command, "kubectl auth can-i create") {
		t.Errorf("admission-probes as %s: %s %s %q\n%s", user, g.Status, g.Message, g.Command, strings.Join(g.Evidence, "\n"))
	}
	ran := 0
	for _, it := range rep.Items {
		if it.Name == "nodes-ready" || it.Name == "rbac" || it.Name == "pod-security-pins" {
			ran++
			if it.Status == "unknown" {
				t.Errorf("%s as %s: %s %s", it.Name, user, it.Status, it.Message)
			}
		}
	}
	if ran != 3 {
		t.Errorf("the other gates did not run\n%s", r)
	}
	hung.mu.Lock()
	defer hung.mu.Unlock()
	if hung.wet > 0 {
		t.Errorf("the webhook got %d reviews that were not dry runs", hung.wet)
	}
}

// shippedProbeRole reads the ClusterRole of deploy/rbac/skew-probes.yaml.
func shippedProbeRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", "skew-probes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &cr); err != nil || cr.Kind != "ClusterRole" || len(cr.Rules) == 0 {
		t.Fatalf("deploy/rbac/skew-probes.yaml: %v %+v", err, cr)
	}
	cr.ResourceVersion = ""
	return &cr
}
