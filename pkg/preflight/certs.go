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

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
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
	sourceServing      = "apiserver serving certificate"
	sourceChain        = "apiserver serving chain"
	sourceRootCA       = "cluster CA (kube-system/kube-root-ca.crt)"
	sourceClientCA     = "client CA (kube-system/extension-apiserver-authentication client-ca-file)"
	sourceFrontProxyCA = "front-proxy CA (kube-system/extension-apiserver-authentication requestheader-client-ca-file)"
)

// authConfigMap is where the apiserver publishes the CAs it trusts for
// client certificates and for its front proxy (k8s.io/kubernetes@v1.37.2
// pkg/controlplane/controller/clusterauthenticationtrust: client-ca-file,
// requestheader-client-ca-file).
const authConfigMap = "extension-apiserver-authentication"

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
func (r *Runner) certsGate(ctx context.Context) (Gate, certsRead) {
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
	for _, src := range []struct{ cm, key, source string }{
		{"kube-root-ca.crt", "ca.crt", sourceRootCA},
		{authConfigMap, "client-ca-file", sourceClientCA},
		{authConfigMap, "requestheader-client-ca-file", sourceFrontProxyCA},
	} {
		cms, err := r.Kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + src.cm})
		if err != nil {
			notes = append(notes, unknown("list configmaps in kube-system", err).Message)
			break
		}
		for _, cm := range cms.Items {
			rest := []byte(cm.Data[src.key])
			for {
				var b *pem.Block
				b, rest = pem.Decode(rest)
				if b == nil {
					break
				}
				if c, err := x509.ParseCertificate(b.Bytes); err == nil {
					facts = append(facts, certFact(src.source, c))
				}
			}
		}
	}
	facts = dedupeCerts(facts)
	kubeadm, cp := r.kubeadmControlPlane(ctx)
	read := certsRead{}
	csrs, err := r.pendingServingCSRs(ctx)
	read.csrs = csrs
	if err != nil {
		read.csrErr = unknown("list certificatesigningrequests", err).Message
		notes = append(notes, read.csrErr+" (kubelet serving requests not checked)")
	}

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
		notes = append(notes, "WARN: kubeadm cluster: the other control-plane certificates (etcd's, the front proxy's client, the apiserver's kubelet and etcd clients, the kubeconfigs of the controller manager, scheduler and admin) are files there that no API shows, so this gate cannot vouch for them: run `sudo kubeadm certs check-expiration` "+where)
		cmd = "sudo kubeadm certs check-expiration"
		st = Worse(st, StatusWarn)
	}
	for _, c := range csrs.Pending {
		age := r.now().Sub(c.Created)
		if age < DefaultSettle {
			continue // the approver may not have run yet
		}
		st = Worse(st, StatusWarn)
		lines = append(lines, fmt.Sprintf("WARN: kubelet serving certificate request %s of %s pending for %s (core Kubernetes does not approve these): %s", c.Name, c.node(), age.Round(time.Minute), csrApprove(c.Name)))
		if cmd == servingCertCommand {
			cmd = csrCommand
		}
	}
	if !servingRead {
		st = Worse(st, StatusUnknown)
	}
	msg := "no certificate read"
	if soonest >= 0 {
		f := facts[soonest]
		msg = fmt.Sprintf("%s read; the first to expire is the %s, on %s (%s); warn under %s, fail under %d",
			cli.Plural(len(facts), "certificate"), f.Source, f.NotAfter.Format("2006-01-02"), daysString(daysLeft(f.NotAfter, now)), cli.Plural(warnD, "day"), failD)
	}
	read.certs = facts
	return Gate{Status: st, Message: msg, Evidence: capLines(append(lines, notes...)), Command: cmd}, read
}

// certsRead is what the certificates gate records.
type certsRead struct {
	certs  []CertFact
	csrs   *CSREvidence
	csrErr string
}

// servingCertCommand shows the serving certificate of the kubeconfig's server.
const servingCertCommand = `echo | openssl s_client -connect "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}' | sed 's#^https://##')" 2>/dev/null | openssl x509 -noout -subject -issuer -enddate`

func daysString(d int) string {
	if d < 0 {
		return fmt.Sprintf("expired %s ago", cli.Plural(-d, "day"))
	}
	return cli.Plural(d, "day") + " left"
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

// dedupeCerts keeps one fact per source and certificate (a CA bundle may
// list a certificate twice).
func dedupeCerts(fs []CertFact) []CertFact {
	seen := map[string]bool{}
	out := fs[:0]
	for _, f := range fs {
		if k := f.Source + "\x00" + f.SHA256; !seen[k] {
			seen[k] = true
			out = append(out, f)
		}
	}
	return out
}

// certLevel grades days left: 0 fine, 1 within warnD, 2 within failD, 3
// expired.
func certLevel(d, warnD, failD int) int {
	switch {
	case d < 0:
		return 3
	case d < failD:
		return 2
	case d < warnD:
		return 1
	}
	return 0
}

// verifyCerts reports a certificate that is now worse than at the
// baseline against the baseline's thresholds: within the warn window,
// within the fail window, or expired, when it was not that far at the
// baseline (a certificate already inside the warn window then still
// regresses when it passes the fail threshold or expires).
func verifyCerts(base, now *PolicyEvidence, baseAt, at time.Time) []Regression {
	warnD, failD := base.CertWarnDays, base.CertFailDays
	if warnD == 0 {
		warnD = DefaultCertWarnDays
	}
	if failD == 0 {
		failD = DefaultCertFailDays
	}
	was := map[string]int{}
	for _, c := range base.Certificates {
		was[c.Source+"\x00"+c.SHA256] = certLevel(daysLeft(c.NotAfter, baseAt), warnD, failD)
	}
	var out []Regression
	for _, c := range now.Certificates {
		d := daysLeft(c.NotAfter, at)
		lvl := certLevel(d, warnD, failD)
		if lvl == 0 || lvl <= was[c.Source+"\x00"+c.SHA256] {
			continue
		}
		st := StatusWarn
		if lvl >= 2 {
			st = StatusFail
		}
		out = append(out, Regression{Kind: RegCertificate, Status: st, Object: c.Source,
			Message: fmt.Sprintf("%s %s expires %s (%s)", c.Source, c.Subject, c.NotAfter.Format("2006-01-02"), daysString(d))})
	}
	return out
}
