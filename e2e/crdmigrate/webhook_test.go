//go:build e2e

package crdmigratee2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// validatingWebhook registers a webhook for UPDATEs of the fixture's
// widgets (failurePolicy Fail) and removes it when the test ends.
func (f *fixture) validatingWebhook(t *testing.T, name string, cc admissionregv1.WebhookClientConfig) {
	t.Helper()
	cfgName := name + "-" + f.ns
	vwc := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: cfgName},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:         name + ".crdmigrate.e2e.gpufleet.dev",
			ClientConfig: cc,
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Update},
				Rule:       admissionregv1.Rule{APIGroups: []string{f.group}, APIVersions: []string{"*"}, Resources: []string{f.plural}},
			}},
			FailurePolicy:           ptr.To(admissionregv1.Fail),
			SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	c := f.cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := c.Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cfgName, metav1.DeleteOptions{}) })
}

// TestCRDMigrateWebhookPreflight: a validating webhook whose Service has no
// endpoints is caught before any write; status says Blocked.
func TestCRDMigrateWebhookPreflight(t *testing.T) {
	f := newFixture(t, "preflight", 50)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "no-endpoints", Namespace: f.ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}
	if _, err := f.cp.Client.CoreV1().Services(f.ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.validatingWebhook(t, "down", admissionregv1.WebhookClientConfig{
		Service: &admissionregv1.ServiceReference{Namespace: f.ns, Name: "no-endpoints", Port: ptr.To[int32](443)},
	})

	r := f.run(t, "status", f.crdName, "-o", "json")
	var st struct {
		Items []struct {
			Verdict  string   `json:"verdict"`
			Reasons  []string `json:"reasons"`
			Webhooks []struct {
				Health string `json:"health"`
			} `json:"webhooks"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || len(st.Items) != 1 {
		t.Fatalf("status: %v\n%s", err, r)
	}
	if r.ExitCode != 1 || st.Items[0].Verdict != "blocked" || len(st.Items[0].Webhooks) != 1 || st.Items[0].Webhooks[0].Health != "fail" {
		t.Errorf("status with a down webhook: want exit 1, Blocked, one Down webhook; got %+v\n%s", st.Items[0], r)
	}

	r = f.run(t, "run", f.crdName, "--method", "client")
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "pre-flight") || !strings.Contains(r.Stderr, "no ready endpoints") ||
		!strings.Contains(r.Stderr, "hint: kubectl get endpointslices -n "+f.ns+" -l kubernetes.io/service-name=no-endpoints") {
		t.Errorf("run with a down webhook: want exit 1 (blocked) naming the webhook, with a hint\n%s", r)
	}
	if got := f.storedAt(t); got[f.group+"/v1"] != f.objects {
		t.Errorf("a refused run changed objects: %v", got)
	}
	if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
		t.Errorf("storedVersions = %v, want [v1 v2]", sv)
	}
	if cp := f.checkpoint(t); cp != nil {
		t.Errorf("a refused run left a checkpoint: %+v", cp)
	}
}

// flakyWebhook is a loopback HTTPS validating webhook that answers 500 for
// objects named failFrom or later (in list order), until fixed. (Counting
// requests would not do: the apiserver may admit one update twice when its
// watch cache was stale.)
type flakyWebhook struct {
	mu       sync.Mutex
	failFrom string
	seen     int
	fixed    bool
	failed   int
	url      string
	caPEM    []byte
	closeFn  func()
}

func (w *flakyWebhook) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	w.seen++
	fail := !w.fixed && review.Request.Name >= w.failFrom
	if fail {
		w.failed++
	}
	w.mu.Unlock()
	if fail {
		http.Error(rw, "webhook backend is failing", http.StatusInternalServerError)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(rw).Encode(review)
}

func startFlakyWebhook(t *testing.T, failFrom string) *flakyWebhook {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "crdmigrate-e2e-webhook-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &flakyWebhook{failFrom: failFrom, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	srv := &http.Server{Handler: w, TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	w.url = "https://" + l.Addr().String() + "/validate"
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

// TestCRDMigrateWebhookMidRun: a validating webhook that starts failing in
// the middle of the run stops it on the object it failed on with exit 4;
// storedVersions is not trimmed; once the webhook works again, running the
// same command resumes and finishes.
func TestCRDMigrateWebhookMidRun(t *testing.T) {
	f := newFixture(t, "midrun", 1200)
	// The pre-flight dry run and the first page (w-00000..w-00499) pass; the
	// webhook fails in the second page.
	w := startFlakyWebhook(t, "w-00650")
	f.validatingWebhook(t, "flaky", admissionregv1.WebhookClientConfig{URL: &w.url, CABundle: w.caPEM})

	r := f.run(t, "run", f.crdName, "--method", "client", "--qps", "1000", "--workers", "8", "--retries", "2", "-o", "json")
	if r.ExitCode != 4 {
		t.Fatalf("run with a webhook failing midway: want exit 4\n%s", r)
	}
	if !strings.Contains(r.Stderr, "rewriting widgets."+f.group+" "+f.ns+"/w-") || !strings.Contains(r.Stderr, "failed calling webhook") ||
		!strings.Contains(r.Stderr, "hint: kubectl crd-migrate run "+f.crdName) {
		t.Errorf("stderr should name the object, the webhook failure and how to resume:\n%s", r.Stderr)
	}
	rep := parseRun(t, r).Items[0]
	if rep.Outcome != "error" {
		t.Errorf("outcome = %q, want error", rep.Outcome)
	}
	if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
		t.Fatalf("storedVersions after a stopped run = %v, want [v1 v2]", sv)
	}
	cp := f.checkpoint(t)
	if cp == nil || cp.Pages != 1 || cp.Processed != 500 || cp.Continue == "" {
		t.Fatalf("checkpoint after the stop = %+v, want page 2 next", cp)
	}
	if got := f.storedAt(t); got[f.group+"/v1"] == 0 {
		t.Fatalf("every object was rewritten although the webhook failed: %v", got)
	}

	w.mu.Lock()
	w.fixed = true
	w.mu.Unlock()
	r = f.run(t, "run", f.crdName, "--method", "client", "--qps", "1000", "--workers", "8", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("run after the webhook is fixed: want exit 0\n%s", r)
	}
	if rep := parseRun(t, r).Items[0]; !rep.Resumed || rep.Processed != int64(f.objects) {
		t.Errorf("resumed run = %+v", rep)
	}
	f.assertAllAtV2(t)
}

// TestCRDMigrateConversionWebhookPreflight: a conversion webhook whose
// Service does not exist blocks the migration (reads at another version go
// through it); status says Blocked and run refuses before writing.
func TestCRDMigrateConversionWebhookPreflight(t *testing.T) {
	f := newFixture(t, "convdown", 20)
	withWebhook := f.crdAtV2.DeepCopy()
	withWebhook.Spec.Conversion = &apiextv1.CustomResourceConversion{
		Strategy: apiextv1.WebhookConverter,
		Webhook: &apiextv1.WebhookConversion{
			ClientConfig:             &apiextv1.WebhookClientConfig{Service: &apiextv1.ServiceReference{Namespace: f.ns, Name: "no-such-converter", Port: ptr.To[int32](443)}},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if err := f.cp.ApplyCRDs(context.Background(), withWebhook); err != nil {
		t.Fatal(err)
	}
	// Put conversion back to None first, so the CRD and namespace can be
	// deleted when the test ends.
	t.Cleanup(func() { _ = f.cp.ApplyCRDs(context.Background(), f.crdAtV2) })

	r := f.run(t, "status", f.crdName)
	if r.ExitCode != 1 || !strings.Contains(r.Stdout, "Webhook FAIL") || !strings.Contains(r.Stdout, "BLOCKED") {
		t.Errorf("status with a missing converter: want exit 1, Webhook FAIL, BLOCKED\n%s", r)
	}
	r = f.run(t, "run", f.crdName, "--method", "client")
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "conversion webhook at service "+f.ns+"/no-such-converter:443 is down: service not found") {
		t.Errorf("run with a missing converter: want exit 1 (blocked) naming it\n%s", r)
	}
	if got := f.storedAt(t); got[f.group+"/v1"] != f.objects {
		t.Errorf("a refused run changed objects: %v", got)
	}
	if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
		t.Errorf("storedVersions = %v, want [v1 v2]", sv)
	}
}
