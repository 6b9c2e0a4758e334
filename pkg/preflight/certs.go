package preflight

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Default certificate thresholds, in days (--cert-warn-days, --cert-fail-days).
const (
	DefaultCertWarnDays = 30
	DefaultCertFailDays = 7
)

// CertFact is one certificate the gate read.
type CertFact struct {
	// Source says where it was read.
	Source   string    `json:"source"`
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"notAfter"`
	// SHA256 is the certificate's fingerprint (first 16 hex digits).
	SHA256 string `json:"sha256"`
}

const (
	sourceServing = "apiserver serving certificate"
	sourceChain   = "apiserver serving chain"
	sourceRootCA  = "cluster CA (kube-system/kube-root-ca.crt)"
)

func (r *Runner) certWarnDays() int {
	if r.Policy.CertWarnDays > 0 {
		return r.Policy.CertWarnDays
	}
	return DefaultCertWarnDays
}

func (r *Runner) certFailDays() int {
	if r.Policy.CertFailDays > 0 {
		return r.Policy.CertFailDays
	}
	return DefaultCertFailDays
}

func certFact(source string, c *x509.Certificate) CertFact {
	sum := sha256.Sum256(c.Raw)
	return CertFact{Source: source, Subject: c.Subject.String(), Issuer: c.Issuer.String(), NotAfter: c.NotAfter.UTC(), SHA256: hex.EncodeToString(sum[:8])}
}

// daysLeft rounds down: 6.9 days left is under a 7-day threshold.
func daysLeft(notAfter, now time.Time) int {
	return int(math.Floor(notAfter.Sub(now).Hours() / 24))
}

// certsGate reads the certificate the apiserver presents and the cluster
// CA every pod trusts (the kube-root-ca.crt ConfigMap), and on kubeadm
// names the command that checks the control-plane certificates the API
// cannot show (kubeadm keeps them as files on the control-plane nodes and
// renews them on `kubeadm upgrade apply`:
// https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-certs/).
// WARN under --cert-warn-days, FAIL under --cert-fail-days.
func (r *Runner) certsGate(ctx context.Context) (Gate, []CertFact) {
	var facts []CertFact
	var notes []string
	servingRead := false
	if r.Policy.ServingCertificates == nil {
		notes = append(notes, "apiserver serving certificate not read: no TLS connection to read it from")
	} else if chain, err := r.Policy.ServingCertificates(ctx); err != nil || len(chain) == 0 {
		notes = append(notes, fmt.Sprintf("apiserver serving certificate not read: %v", err))
	} else {
		servingRead = true
		facts = append(facts, certFact(sourceServing, chain[0]))
		for _, c := range chain[1:] {
			facts = append(facts, certFact(sourceChain, c))
		}
	}
	cms, err := r.Kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kube-root-ca.crt"})
	if err != nil {
		notes = append(notes, unknown("list configmaps in kube-system", err).Message)
	} else {
		for _, cm := range cms.Items {
			rest := []byte(cm.Data["ca.crt"])
			for {
				var b *pem.Block
				b, rest = pem.Decode(rest)
				if b == nil {
					break
				}
				if c, err := x509.ParseCertificate(b.Bytes); err == nil {
					facts = append(facts, certFact(sourceRootCA, c))
				}
			}
		}
	}
	kubeadm, cp := r.kubeadmControlPlane(ctx)

	now := r.now()
	warnD, failD := r.certWarnDays(), r.certFailDays()
	st := StatusPass
	var lines []string
	soonest := -1
	for i, f := range facts {
		d := daysLeft(f.NotAfter, now)
		s := StatusPass
		switch {
		case d < failD:
			s = StatusFail
		case d < warnD:
			s = StatusWarn
		}
		st = Worse(st, s)
		lines = append(lines, fmt.Sprintf("%s: %s %s, issuer %s, expires %s (%s)", s, f.Source, f.Subject, f.Issuer, f.NotAfter.Format("2006-01-02"), daysString(d)))
		if soonest < 0 || f.NotAfter.Before(facts[soonest].NotAfter) {
			soonest = i
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return statusOfLine(lines[i]).Rank() > statusOfLine(lines[j]).Rank() })
	cmd := servingCertCommand
	if kubeadm {
		where := "on each control-plane node"
		if len(cp) > 0 {
			where = "on each control-plane node (" + strings.Join(cp, ", ") + ")"
		}
		notes = append(notes, "kubeadm cluster: the other control-plane certificates (etcd, front-proxy, kubeconfigs of the controller manager and scheduler) are files there: run `sudo kubeadm certs check-expiration` "+where)
		cmd = "sudo kubeadm certs check-expiration"
	}
	if !servingRead {
		st = Worse(st, StatusUnknown)
	}
	msg := "no certificate read"
	if soonest >= 0 {
		f := facts[soonest]
		msg = fmt.Sprintf("%d certificates read; the first to expire is the %s, on %s (%s); warn under %d days, fail under %d",
			len(facts), f.Source, f.NotAfter.Format("2006-01-02"), daysString(daysLeft(f.NotAfter, now)), warnD, failD)
	}
	return Gate{Status: st, Message: msg, Evidence: capLines(append(lines, notes...)), Command: cmd}, facts
}

// servingCertCommand shows the serving certificate of the kubeconfig's server.
const servingCertCommand = `echo | openssl s_client -connect "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}' | sed 's#^https://##')" 2>/dev/null | openssl x509 -noout -subject -issuer -enddate`

func daysString(d int) string {
	if d < 0 {
		return fmt.Sprintf("expired %d days ago", -d)
	}
	return fmt.Sprintf("%d days left", d)
}

// kubeadmControlPlane reports a kubeadm cluster (its kube-system/kubeadm-config
// ConfigMap, https://kubernetes.io/docs/reference/setup-tools/kubeadm/generated/kubeadm_config/)
// and its control-plane nodes.
func (r *Runner) kubeadmControlPlane(ctx context.Context) (bool, []string) {
	cms, err := r.Kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubeadm-config"})
	if err != nil || len(cms.Items) == 0 {
		return false, nil
	}
	var cp []string
	if snap, err := r.snapshot(ctx); err == nil {
		for _, n := range snap.Nodes {
			if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
				cp = append(cp, n.Name)
			}
		}
	}
	sort.Strings(cp)
	return true, cp
}

// verifyCerts reports a certificate that is now within the baseline's
// thresholds and was not then.
func verifyCerts(base, now *PolicyEvidence, baseAt, at time.Time) []Regression {
	warnD, failD := base.CertWarnDays, base.CertFailDays
	if warnD == 0 {
		warnD = DefaultCertWarnDays
	}
	if failD == 0 {
		failD = DefaultCertFailDays
	}
	was := map[string]bool{}
	for _, c := range base.Certificates {
		if daysLeft(c.NotAfter, baseAt) < warnD {
			was[c.Source+"\x00"+c.SHA256] = true
		}
	}
	var out []Regression
	for _, c := range now.Certificates {
		d := daysLeft(c.NotAfter, at)
		if d >= warnD || was[c.Source+"\x00"+c.SHA256] {
			continue
		}
		st := StatusWarn
		if d < failD {
			st = StatusFail
		}
		out = append(out, Regression{Kind: RegCertificate, Status: st, Object: c.Source,
			Message: fmt.Sprintf("%s %s expires %s (%s)", c.Source, c.Subject, c.NotAfter.Format("2006-01-02"), daysString(d))})
	}
	return out
}
