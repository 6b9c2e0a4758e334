package preflight

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func selfSigned(t *testing.T, cn string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: notAfter.Add(-365 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertsGate(t *testing.T) {
	ca := selfSigned(t, "kubernetes", now.Add(3650*24*time.Hour))
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	proxyCA := selfSigned(t, "front-proxy-ca", now.Add(3*24*time.Hour))
	objs := []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(caPEM)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}},
	}
	// On kubeadm the gate cannot see the certificates kept as files: at
	// least a WARN naming the command that can.
	for _, tc := range []struct {
		days int
		want Status
	}{{90, StatusWarn}, {20, StatusWarn}, {5, StatusFail}, {-2, StatusFail}} {
		serving := selfSigned(t, "kube-apiserver", now.Add(time.Duration(tc.days)*24*time.Hour+time.Hour))
		kc := fake.NewClientset(&objs[0], &objs[1], node("cp-0", "control-plane", "v1.36.2", true, 0))
		n, _ := kc.CoreV1().Nodes().Get(context.Background(), "cp-0", metav1.GetOptions{})
		n.Labels["node-role.kubernetes.io/control-plane"] = ""
		_, _ = kc.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		r := &Runner{Kube: kc, Now: func() time.Time { return now }, Policy: PolicyOptions{
			ServingCertificates: func(context.Context) ([]*x509.Certificate, error) { return []*x509.Certificate{serving}, nil }}}
		g, read := r.certsGate(context.Background())
		facts := read.certs
		ev := strings.Join(g.Evidence, "\n")
		if g.Status != tc.want || len(facts) != 2 || !strings.Contains(ev, "CN=kubernetes") || !strings.Contains(ev, "kubeadm certs check-expiration` on each control-plane node (cp-0)") ||
			g.Command != "sudo kubeadm certs check-expiration" {
			t.Errorf("%d days: %s %s %q\n%s", tc.days, g.Status, g.Message, g.Command, ev)
		}
	}
	// Not kubeadm: the apiserver's serving certificate, the cluster CA and
	// the CAs it publishes for client certificates and its front proxy.
	serving := selfSigned(t, "kube-apiserver", now.Add(90*24*time.Hour))
	auth := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: authConfigMap}, Data: map[string]string{
		"client-ca-file": string(caPEM), "requestheader-client-ca-file": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxyCA.Raw}))}}
	r := &Runner{Kube: fake.NewClientset(&objs[0], auth), Now: func() time.Time { return now }, Policy: PolicyOptions{
		ServingCertificates: func(context.Context) ([]*x509.Certificate, error) { return []*x509.Certificate{serving}, nil }}}
	g, read := r.certsGate(context.Background())
	facts := read.certs
	if g.Status != StatusFail || len(facts) != 4 || !strings.Contains(strings.Join(g.Evidence, "\n"), "FAIL: front-proxy CA (kube-system/extension-apiserver-authentication requestheader-client-ca-file) CN=front-proxy-ca") {
		t.Errorf("extension-apiserver-authentication: %s %s %d\n%s", g.Status, g.Message, len(facts), strings.Join(g.Evidence, "\n"))
	}
	// No TLS connection to read from: UNKNOWN, never PASS.
	g, _ = (&Runner{Kube: fake.NewClientset(), Now: func() time.Time { return now }}).certsGate(context.Background())
	if g.Status != StatusUnknown {
		t.Errorf("without the serving certificate: %s %s", g.Status, g.Message)
	}
}

func TestVerifyCerts(t *testing.T) {
	base := &PolicyEvidence{CertWarnDays: 30, CertFailDays: 7, Certificates: []CertFact{
		{Source: sourceServing, Subject: "CN=kube-apiserver", NotAfter: now.Add(40 * 24 * time.Hour), SHA256: "aa"},
		{Source: sourceRootCA, Subject: "CN=kubernetes", NotAfter: now.Add(10 * 24 * time.Hour), SHA256: "bb"}}}
	// Two weeks later: the serving certificate is within 30 days; the CA,
	// within them already at the baseline, has expired since.
	at := now.Add(14 * 24 * time.Hour)
	regs := verifyCerts(base, base, now, at)
	if len(regs) != 2 || regs[0].Status != StatusWarn || regs[0].Object != sourceServing || !strings.Contains(regs[0].Message, "26 days left") ||
		regs[1].Status != StatusFail || regs[1].Object != sourceRootCA || !strings.Contains(regs[1].Message, "expired 4 days ago") {
		t.Errorf("%+v", regs)
	}
	// A day later the CA is still 8 days from expiry, inside the warn
	// window as at the baseline: nothing new.
	if regs := verifyCerts(base, base, now, now.Add(24*time.Hour)); len(regs) != 0 {
		t.Errorf("no change: %+v", regs)
	}
	// Past the fail threshold, still valid: a FAIL too.
	if regs := verifyCerts(base, base, now, now.Add(4*24*time.Hour)); len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != sourceRootCA {
		t.Errorf("into the fail window: %+v", regs)
	}
}

// A node replaced by the upgrade asks for a kubelet serving certificate,
// which core Kubernetes never approves: pending past the settle time it
// is a FAIL in verify (a WARN before), and a WARN in preflight.
func TestKubeletServingCSRs(t *testing.T) {
	csr := func(name, signer string, created time.Time, conds ...certificatesv1.CertificateSigningRequestCondition) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec:   certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Username: "system:node:" + name},
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: conds}}
	}
	approved := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	retried := csr("gpu-ok", KubeletServingSigner, now.Add(-2*time.Hour))
	retried.Name = "gpu-ok-first"
	kc := fake.NewClientset(node("gpu-old"), node("gpu-ok"),
		csr("gpu-old", KubeletServingSigner, now.Add(-48*time.Hour)),
		csr("gpu-ok", KubeletServingSigner, now.Add(-time.Hour), approved),
		// A request the kubelet gave up on before its next was approved.
		retried,
		// An older pending request of a node: it is listed by its newest.
		func() *certificatesv1.CertificateSigningRequest {
			c := csr("gpu-old", KubeletServingSigner, now.Add(-50*time.Hour))
			c.Name = "gpu-old-first"
			return c
		}(),
		// A request of a node the pool upgrade replaced.
		csr("gpu-replaced", KubeletServingSigner, now.Add(-3*time.Hour)),
		csr("gpu-client", certificatesv1.KubeAPIServerClientKubeletSignerName, now.Add(-time.Hour)))
	r := &Runner{Kube: kc, Now: func() time.Time { return now }}
	g, read := r.certsGate(context.Background())
	if read.csrs == nil || !read.csrs.Read || len(read.csrs.Pending) != 1 || read.csrs.Pending[0].Name != "gpu-old" ||
		!strings.Contains(strings.Join(g.Evidence, "\n"), "WARN: kubelet serving certificate request gpu-old of node gpu-old pending for 48h0m0s") {
		t.Fatalf("preflight: %s %+v\n%s", g.Status, read.csrs, strings.Join(g.Evidence, "\n"))
	}
	base := &PolicyEvidence{CSRs: read.csrs}
	at := now.Add(time.Hour)
	cur := &PolicyEvidence{CSRs: &CSREvidence{Read: true, Pending: []CSRFact{read.csrs.Pending[0],
		{Name: "gpu-new-0", Requestor: "system:node:gpu-new-0", Created: at.Add(-40 * time.Minute)},
		{Name: "gpu-new-1", Requestor: "system:node:gpu-new-1", Created: at.Add(-2 * time.Minute)}}}}
	got := map[string]Status{}
	for _, r := range verifyCSRs(base, cur, at, 15*time.Minute) {
		got[r.Object] = r.Status
		if !strings.Contains(r.Command, "kubectl certificate approve "+strings.TrimPrefix(r.Object, "csr/")) {
			t.Errorf("command %q", r.Command)
		}
	}
	if len(got) != 2 || got["csr/gpu-new-0"] != StatusFail || got["csr/gpu-new-1"] != StatusWarn {
		t.Errorf("verify: %v", got)
	}
	// A settle time below a second is held against the age, not the age
	// rounded for the message.
	young := &PolicyEvidence{CSRs: &CSREvidence{Read: true, Pending: []CSRFact{{Name: "gpu-new-2", Requestor: "system:node:gpu-new-2", Created: at.Add(-400 * time.Millisecond)}}}}
	if regs := verifyCSRs(base, young, at, time.Millisecond); len(regs) != 1 || regs[0].Status != StatusFail {
		t.Errorf("a request 400ms old under a 1ms settle: %+v", regs)
	}
	if regs := verifyCSRs(base, &PolicyEvidence{CSRs: &CSREvidence{}, Unread: map[string]string{unreadCSRs: "forbidden"}}, at, 0); len(regs) != 1 || regs[0].Status != StatusUnknown {
		t.Errorf("unread now: %+v", regs)
	}
}
