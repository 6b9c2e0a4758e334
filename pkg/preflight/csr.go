package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletServingSigner is the signer of kubelet serving certificates.
// The CSR approving controllers of core Kubernetes do not approve them
// ("for security reasons": an operator or a custom approving controller
// must; https://kubernetes.io/docs/reference/access-authn-authz/kubelet-tls-bootstrapping/#certificate-rotation),
// so a replaced or reinstalled node whose kubelet asks for one has no
// serving certificate until someone approves it: logs, exec, port-forward
// and metrics of its pods fail.
const KubeletServingSigner = certificatesv1.KubeletServingSignerName

// CSRFact is a kubelet serving certificate request nobody answered.
type CSRFact struct {
	Name string `json:"name"`
	// Requestor is spec.username (system:node:NAME for a kubelet).
	Requestor string    `json:"requestor"`
	Created   time.Time `json:"created"`
}

// CSREvidence is what the certificates gate read of the CSR API.
type CSREvidence struct {
	// Read is false when the CSRs could not be listed; ReadAt is when
	// they were.
	Read    bool      `json:"read"`
	ReadAt  time.Time `json:"readAt,omitempty"`
	Pending []CSRFact `json:"pending,omitempty"`
}

// pendingServingCSRs lists the kubelet serving CSRs that are neither
// approved, denied nor failed, leaving out the requests a node no longer
// waits on: one older than a request of the same node that was approved
// (the kubelet's certificate manager gives up on a request and sends a
// new one, k8s.io/client-go@v0.37.2 util/certificate/certificate_manager.go
// rotateCerts, so an approver that was down while the pool rolled leaves
// the first unanswered; the CSR cleaner deletes approved requests after
// an hour, so this is seen only within it), one older than another
// pending request of the same node (the node is listed once, by its
// newest), and one of a node that no longer exists (a pool
// upgrade replaces nodes; the CSR cleaner deletes pending requests after
// 24 hours, pkg/controller/certificates/cleaner/cleaner.go).
func (r *Runner) pendingServingCSRs(ctx context.Context) (*CSREvidence, error) {
	l, err := r.Kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return &CSREvidence{}, err
	}
	ev := &CSREvidence{Read: true, ReadAt: r.now().UTC()}
	var nodes map[string]bool
	if snap, err := r.snapshot(ctx); err == nil && len(snap.Nodes) > 0 {
		nodes = map[string]bool{}
		for _, n := range snap.Nodes {
			nodes[n.Name] = true
		}
	}
	approvedAt := map[string]time.Time{} // per requestor, its newest approved request
	var pending []CSRFact
	for _, c := range l.Items {
		if c.Spec.SignerName != KubeletServingSigner {
			continue
		}
		answered, approved := len(c.Status.Certificate) > 0, len(c.Status.Certificate) > 0
		for _, cond := range c.Status.Conditions {
			answered = answered || cond.Type == certificatesv1.CertificateApproved || cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed
			approved = approved || cond.Type == certificatesv1.CertificateApproved
		}
		if approved && c.CreationTimestamp.After(approvedAt[c.Spec.Username]) {
			approvedAt[c.Spec.Username] = c.CreationTimestamp.Time
		}
		if !answered {
			pending = append(pending, CSRFact{Name: c.Name, Requestor: c.Spec.Username, Created: c.CreationTimestamp.UTC()})
		}
	}
	newest := map[string]CSRFact{}
	for _, p := range pending {
		if n, ok := newest[p.Requestor]; !ok || p.Created.After(n.Created) || p.Created.Equal(n.Created) && p.Name > n.Name {
			newest[p.Requestor] = p
		}
	}
	for _, p := range pending {
		if a, ok := approvedAt[p.Requestor]; ok && p.Created.Before(a) || newest[p.Requestor].Name != p.Name {
			continue
		}
		if n, ok := strings.CutPrefix(p.Requestor, "system:node:"); ok && nodes != nil && !nodes[n] {
			continue
		}
		ev.Pending = append(ev.Pending, p)
	}
	sort.Slice(ev.Pending, func(i, j int) bool { return ev.Pending[i].Name < ev.Pending[j].Name })
	return ev, nil
}

func (f CSRFact) node() string {
	if n, ok := strings.CutPrefix(f.Requestor, "system:node:"); ok {
		return "node " + n
	}
	return f.Requestor
}

const csrCommand = "kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving"

// csrApprove says how to answer one: check it is the node's own request
// before approving (the checks of the page above).
func csrApprove(name string) string {
	return fmt.Sprintf("kubectl describe csr %s   # approve only a request of the node itself for its own names and addresses: kubectl certificate approve %s", name, name)
}

// verifyCSRs reports the kubelet serving CSRs pending now that were not
// at the baseline: a FAIL once pending longer than settle (an approver
// that works would have answered), a WARN before.
func verifyCSRs(base, now *PolicyEvidence, at time.Time, settle time.Duration) []Regression {
	if now.CSRs == nil {
		return nil
	}
	if base.CSRs != nil && base.CSRs.Read && !now.CSRs.Read {
		return []Regression{{Kind: RegPolicyUnread, Status: StatusUnknown, Object: "certificatesigningrequests",
			Message: "kubelet serving CSRs were read at the baseline and cannot be listed now: " + now.Unread[unreadCSRs], Command: "kubectl auth can-i list certificatesigningrequests"}}
	}
	if settle <= 0 {
		settle = DefaultSettle
	}
	was := map[string]bool{}
	if base.CSRs != nil {
		for _, c := range base.CSRs.Pending {
			was[c.Name] = true
		}
	}
	if !now.CSRs.ReadAt.IsZero() {
		at = now.CSRs.ReadAt
	}
	var out []Regression
	for _, c := range now.CSRs.Pending {
		if was[c.Name] {
			continue
		}
		// The settle time is held against the age itself: rounded to the
		// second, a request read within half a second of its creation
		// would stay a WARN under any settle time below that.
		pending := at.Sub(c.Created)
		age := pending.Round(time.Second)
		reg := Regression{Kind: RegCertificate, Status: StatusWarn, Object: "csr/" + c.Name, Command: csrApprove(c.Name),
			Message: fmt.Sprintf("kubelet serving certificate request %s of %s pending for %s: core Kubernetes does not approve these; until someone does, logs, exec and metrics of its pods fail", c.Name, c.node(), age)}
		if pending > settle {
			reg.Status = StatusFail
		}
		out = append(out, reg)
	}
	return out
}
