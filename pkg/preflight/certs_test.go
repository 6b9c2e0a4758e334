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
	objs := []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(caPEM)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}},
	}
	for _, tc := range []struct {
		days int
		want Status
	}{{90, StatusPass}, {20, StatusWarn}, {5, StatusFail}, {-2, StatusFail}} {
		serving := selfSigned(t, "kube-apiserver", now.Add(time.Duration(tc.days)*24*time.Hour+time.Hour))
		kc := fake.NewClientset(&objs[0], &objs[1], node("cp-0", "control-plane", "v1.36.2", true, 0))
		n, _ := kc.CoreV1().Nodes().Get(context.Background(), "cp-0", metav1.GetOptions{})
		n.Labels["node-role.kubernetes.io/control-plane"] = ""
		_, _ = kc.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		r := &Runner{Kube: kc, Now: func() time.Time { return now }, Policy: PolicyOptions{
			ServingCertificates: func(context.Context) ([]*x509.Certificate, error) { return []*x509.Certificate{serving}, nil }}}
		g, facts := r.certsGate(context.Background())
		ev := strings.Join(g.Evidence, "\n")
		if g.Status != tc.want || len(facts) != 2 || !strings.Contains(ev, "CN=kubernetes") || !strings.Contains(ev, "kubeadm certs check-expiration` on each control-plane node (cp-0)") ||
			g.Command != "sudo kubeadm certs check-expiration" {
			t.Errorf("%d days: %s %s %q\n%s", tc.days, g.Status, g.Message, g.Command, ev)
		}
	}
	// No TLS connection to read from: UNKNOWN, never PASS.
	g, _ := (&Runner{Kube: fake.NewClientset(), Now: func() time.Time { return now }}).certsGate(context.Background())
	if g.Status != StatusUnknown {
		t.Errorf("without the serving certificate: %s %s", g.Status, g.Message)
	}
}

func TestVerifyCerts(t *testing.T) {
	base := &PolicyEvidence{CertWarnDays: 30, CertFailDays: 7, Certificates: []CertFact{
		{Source: sourceServing, Subject: "CN=kube-apiserver", NotAfter: now.Add(40 * 24 * time.Hour), SHA256: "aa"},
		{Source: sourceRootCA, Subject: "CN=kubernetes", NotAfter: now.Add(10 * 24 * time.Hour), SHA256: "bb"}}}
	// Two weeks later: the serving certificate is within 30 days; the CA
	// was within them already at the baseline.
	at := now.Add(14 * 24 * time.Hour)
	regs := verifyCerts(base, base, now, at)
	if len(regs) != 1 || regs[0].Status != StatusWarn || regs[0].Object != sourceServing || !strings.Contains(regs[0].Message, "26 days left") {
		t.Errorf("%+v", regs)
	}
}
