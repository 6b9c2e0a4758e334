//go:build e2e

package skewe2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// irsaWebhook is a mutating admission webhook served by the test over TLS
// that injects what amazon-eks-pod-identity-webhook v0.6.17 injects into a
// pod whose ServiceAccount carries eks.amazonaws.com/role-arn
// (pkg/handler/handler.go: the "aws-iam-token" projected token volume,
// audience sts.amazonaws.com, expirationSeconds 86400, path "token", added
// at /spec/volumes/0; each container replaced at /spec/containers with
// AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and the volume mounted read-only
// at /var/run/secrets/eks.amazonaws.com/serviceaccount). It reads the
// ServiceAccount from the apiserver, as the real one reads it from its
// informer. It counts reviews that were not dry runs.
type irsaWebhook struct {
	srv *httptest.Server
	url string
	ca  []byte
	wet atomic.Int64
	// podIdentity, when set, says whether a ServiceAccount has an EKS Pod
	// Identity association: its pods get podIdentityPatch.
	podIdentity func(ns, sa string) bool
}

func startIRSAWebhook(t *testing.T, cp *harness.ControlPlane) *irsaWebhook {
	t.Helper()
	w := &irsaWebhook{}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, "bad review", http.StatusBadRequest)
			return
		}
		if review.Request.DryRun == nil || !*review.Request.DryRun {
			w.wet.Add(1)
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		var pod corev1.Pod
		if err := json.Unmarshal(review.Request.Object.Raw, &pod); err == nil && pod.Spec.ServiceAccountName != "" {
			sa, err := cp.Client.CoreV1().ServiceAccounts(review.Request.Namespace).Get(req.Context(), pod.Spec.ServiceAccountName, metav1.GetOptions{})
			switch {
			case err == nil && w.podIdentity != nil && w.podIdentity(review.Request.Namespace, sa.Name):
				resp.Patch, resp.PatchType = podIdentityPatch(&pod), ptr.To(admissionv1.PatchTypeJSONPatch)
			case err == nil && sa.Annotations[health.AnnotationEKSRoleARN] != "":
				resp.Patch, resp.PatchType = irsaPatch(&pod, sa.Annotations[health.AnnotationEKSRoleARN]), ptr.To(admissionv1.PatchTypeJSONPatch)
			}
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(rw).Encode(review)
	}))
	w.srv.StartTLS()
	w.url = w.srv.URL + "/mutate"
	w.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	t.Cleanup(w.srv.Close)
	return w
}

// irsaPatch is the JSON patch of handler.go's getPodSpecPatch for a pod
// with no AWS variables of its own.
func irsaPatch(pod *corev1.Pod, arn string) []byte {
	const mount = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
	vol := corev1.Volume{Name: "aws-iam-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
		ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "sts.amazonaws.com", ExpirationSeconds: ptr.To[int64](86400), Path: "token"}}}}}}
	containers := append([]corev1.Container(nil), pod.Spec.Containers...)
	for i := range containers {
		c := &containers[i]
		c.Env = append(append([]corev1.EnvVar(nil), c.Env...), corev1.EnvVar{Name: "AWS_ROLE_ARN", Value: arn}, corev1.EnvVar{Name: "AWS_WEB_IDENTITY_TOKEN_FILE", Value: mount + "/token"})
		c.VolumeMounts = append(append([]corev1.VolumeMount(nil), c.VolumeMounts...), corev1.VolumeMount{Name: "aws-iam-token", ReadOnly: true, MountPath: mount})
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := []op{{"add", "/spec/volumes/0", vol}}
	if pod.Spec.Volumes == nil {
		ops = []op{{"add", "/spec/volumes", []corev1.Volume{vol}}}
	}
	ops = append(ops, op{"add", "/spec/containers", containers})
	b, _ := json.Marshal(ops)
	return b
}

// register adds the webhook as the real one's deploy/mutatingwebhook.yaml
// does (CREATE of pods, sideEffects None, failurePolicy Ignore, pods
// labelled eks.amazonaws.com/skip-pod-identity-webhook left out), for pods
// of ns only so that the rest of the suite is untouched.
func (w *irsaWebhook) register(t *testing.T, cp *harness.ControlPlane, name, ns string) {
	t.Helper()
	mwc := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.MutatingWebhook{{Name: "pod-identity-webhook.amazonaws.com",
			ClientConfig:  admissionregv1.WebhookClientConfig{URL: &w.url, CABundle: w.ca},
			FailurePolicy: ptr.To(admissionregv1.Ignore), SideEffects: ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "eks.amazonaws.com/skip-pod-identity-webhook",
				Operator: metav1.LabelSelectorOpDoesNotExist}}},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}}}
	c := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := c.Create(context.Background(), mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// waitInjected dry-runs the gate's pod until the apiserver's webhook
// configuration (read from a cache) injects, or stops injecting.
func waitInjected(t *testing.T, cp *harness.ControlPlane, ns, sa string, want bool) {
	t.Helper()
	b := health.IdentityBinding{Namespace: ns, ServiceAccount: sa, Provider: health.IdentityEKS}
	if err := harness.Eventually(ctxT(t), "webhook injects: "+map[bool]string{true: "yes", false: "no"}[want], time.Minute, func(ctx context.Context) (bool, error) {
		sent := health.IdentityProbePod(b)
		got, err := cp.Client.CoreV1().Pods(ns).Create(ctx, sent, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		return health.InjectedInto(health.IdentityEKS, sent, got).Empty() != want, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The workload-identity gate against a real mutating webhook: preflight
// records what the webhook injects into a dry-run pod of an IRSA
// ServiceAccount (and nothing of the ServiceAccount admission plugin's own
// kube-api-access volume), creates nothing, and verify is clean while the
// webhook runs; with the webhook's configuration deleted, verify fails
// naming the ServiceAccount.
func TestWorkloadIdentityGate(t *testing.T) {
	cp := scenario(t)
	// Each kubectl skew run reads the whole cluster: longer than ctxT's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	const arn = "arn:aws:iam::111122223333:role/s3-reader"
	for _, sa := range []*corev1.ServiceAccount{
		{ObjectMeta: metav1.ObjectMeta{Name: "s3-reader", Annotations: map[string]string{health.AnnotationEKSRoleARN: arn}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	} {
		if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w := startIRSAWebhook(t, cp)
	w.register(t, cp, "irsa-"+ns, ns)
	waitInjected(t, cp, ns, "s3-reader", true)

	baseline := t.TempDir() + "/baseline.yaml"
	g, _, r := preflight(t, cp, "workload-identity", "--target", "v1.37", "--workload-identity", "--save", baseline)
	want := ns + "/s3-reader (eks-irsa " + arn + "): injected env AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE; token volume audience sts.amazonaws.com at /var/run/secrets/eks.amazonaws.com/serviceaccount"
	if g.Status != "ok" || !evidenceHas(g, want) {
		t.Fatalf("clean: want PASS with %q, got %s %q %q\n%s", want, g.Status, g.Message, g.Evidence, r)
	}
	if n := w.wet.Load(); n != 0 {
		t.Errorf("the webhook saw %d reviews that were not dry runs", n)
	}
	if pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods stored in %s: %v %v", ns, pods, err)
	}
	if v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline); strings.Contains(v.Stdout, `"workload-identity"`) {
		t.Fatalf("unchanged: want no workload-identity item\n%s", v)
	}

	// The webhook stops mutating: its configuration is gone.
	if err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "irsa-"+ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitInjected(t, cp, ns, "s3-reader", false)
	v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline)
	var vr struct {
		Items []struct{ Kind, Status, Object, Message string }
	}
	if err := json.Unmarshal([]byte(v.Stdout), &vr); err != nil {
		t.Fatalf("%v\n%s", err, v)
	}
	found := false
	for _, it := range vr.Items {
		if it.Kind != "workload-identity" {
			continue
		}
		if it.Status == "fail" && it.Object == "serviceaccount/"+ns+"/s3-reader" &&
			strings.Contains(it.Message, "ServiceAccount "+ns+"/s3-reader") && strings.Contains(it.Message, "no longer injects env AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE; token volume audience sts.amazonaws.com") {
			found = true
		} else {
			t.Errorf("unexpected item %+v", it)
		}
	}
	if v.ExitCode != 1 || !found {
		t.Fatalf("want exit 1 and a FAIL naming %s/s3-reader\n%s", ns, v)
	}
}
