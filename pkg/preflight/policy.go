package preflight

import (
	"context"
	"crypto/x509"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The policy-continuity gates: security controls that must not silently
// disappear across an upgrade. Preflight records what they read in
// Evidence.Policy; verify compares (verifyPolicy).
const (
	GatePSAPins   = "pod-security-pins"
	GateAdmission = "admission-probes"
	GateRBAC      = "rbac"
	GateCerts     = "certificates"
	GateImages    = "image-pinning"
)

// PolicyOptions tune the policy gates.
type PolicyOptions struct {
	// Probes are the user's probe manifests (--probe-file), as
	// ParseProbeFile reads them.
	Probes []ProbeManifest
	// ProbeErrors are probe files that could not be read, one line each:
	// the admission gate is UNKNOWN with them and the other gates run.
	ProbeErrors []string
	// Baseline, set by verify, is the saved policy evidence: the admission
	// gate replays the probes it recorded as denied instead of deriving
	// new ones.
	Baseline *PolicyEvidence
	// CertWarnDays and CertFailDays: a certificate that expires within
	// them warns or fails (DefaultCertWarnDays, DefaultCertFailDays when 0).
	CertWarnDays, CertFailDays int
	// ServingCertificates returns the chain the apiserver presents on the
	// kubeconfig's connection (nil: the certificates gate cannot read it).
	ServingCertificates func(ctx context.Context) ([]*x509.Certificate, error)
	// ProbeWorkers bounds the dry-run creates in flight (8 when 0).
	ProbeWorkers int
	// PatchMaxDays: days behind the newest patch past which the
	// patch-level gate warns (DefaultPatchMaxDays when 0).
	PatchMaxDays int
}

// PolicyEvidence is what the policy gates read, saved with the baseline.
type PolicyEvidence struct {
	// Probes are the admission probes and their outcomes; the object of
	// each probe denied by its control is kept, for verify to replay.
	Probes []Probe `json:"probes,omitempty"`
	// Admission is the admission webhooks', policies' and bindings'
	// configuration (admissionconfig.go), which verify diffs.
	Admission *AdmissionConfig `json:"admission,omitempty"`
	// PodSecurity are the namespaces with Pod Security enforce labels.
	PodSecurity []NamespacePodSecurity `json:"podSecurity,omitempty"`
	// RBAC is every role and binding (nil when not readable).
	RBAC *RBACEvidence `json:"rbac,omitempty"`
	// Certificates are the certificates read and the thresholds used.
	Certificates []CertFact `json:"certificates,omitempty"`
	// CSRs are the kubelet serving certificate requests nobody answered.
	CSRs         *CSREvidence `json:"csrs,omitempty"`
	CertWarnDays int          `json:"certWarnDays,omitempty"`
	CertFailDays int          `json:"certFailDays,omitempty"`
	// Images are the containers the image-pinning gate looked at.
	Images []ImageFact `json:"images,omitempty"`
	// Patch is the cluster's patch level and support.
	Patch *PatchFact `json:"patch,omitempty"`
	// Unread says, per gate, what could not be read.
	Unread map[string]string `json:"unread,omitempty"`
}

// policyState caches what several policy gates read.
type policyState struct {
	nsOnce sync.Once
	nss    []corev1.Namespace
	nsErr  error
}

// policyGates returns the policy gates, each storing its evidence in
// ev.Policy under mu.
func (r *Runner) policyGates(ev *Evidence, mu *sync.Mutex) map[string]func(context.Context) Gate {
	pe := &PolicyEvidence{}
	ev.Policy = pe
	return map[string]func(context.Context) Gate{
		GatePSAPins: recorded(mu, pe, GatePSAPins, r.podSecurityPinsGate, func(v []NamespacePodSecurity) { pe.PodSecurity = v }),
		GateAdmission: recorded(mu, pe, GateAdmission, r.admissionGate, func(v admissionRead) {
			pe.Probes, pe.Admission = v.probes, v.config
			if v.configErr != "" {
				if pe.Unread == nil {
					pe.Unread = map[string]string{}
				}
				pe.Unread[unreadAdmissionConfig] = v.configErr
			}
		}),
		GateRBAC:  recorded(mu, pe, GateRBAC, r.rbacGate, func(v *RBACEvidence) { pe.RBAC = v }),
		GatePatch: recorded(mu, pe, GatePatch, r.patchGate, func(v *PatchFact) { pe.Patch = v }),
		GateCerts: recorded(mu, pe, GateCerts, r.certsGate, func(v certsRead) {
			pe.Certificates, pe.CertWarnDays, pe.CertFailDays, pe.CSRs = v.certs, r.certWarnDays(), r.certFailDays(), v.csrs
			if v.csrErr != "" {
				if pe.Unread == nil {
					pe.Unread = map[string]string{}
				}
				pe.Unread[unreadCSRs] = v.csrErr
			}
		}),
		GateImages: recorded(mu, pe, GateImages, r.imagesGate, func(v []ImageFact) { pe.Images = v }),
	}
}

// recorded runs a gate and keeps what it read, and why it could not read,
// in the policy evidence.
func recorded[T any](mu *sync.Mutex, pe *PolicyEvidence, name string, gate func(context.Context) (Gate, T), keep func(T)) func(context.Context) Gate {
	return func(ctx context.Context) Gate {
		g, v := gate(ctx)
		mu.Lock()
		defer mu.Unlock()
		keep(v)
		if g.Status == StatusUnknown {
			if pe.Unread == nil {
				pe.Unread = map[string]string{}
			}
			pe.Unread[name] = g.Message
		}
		return g
	}
}

// namespaces lists the namespaces once for the policy gates.
func (r *Runner) namespaces(ctx context.Context) ([]corev1.Namespace, error) {
	r.pol.nsOnce.Do(func() {
		var all []*corev1.Namespace
		all, r.pol.nsErr = listAll[*corev1.Namespace](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.Kube.CoreV1().Namespaces().List(ctx, o)
		})
		for _, n := range all {
			r.pol.nss = append(r.pol.nss, *n)
		}
		sort.Slice(r.pol.nss, func(i, j int) bool { return r.pol.nss[i].Name < r.pol.nss[j].Name })
	})
	return r.pol.nss, r.pol.nsErr
}

// Regression kinds of the policy gates.
const (
	RegAdmission      = "admission-probe"
	RegRBAC           = "rbac-grant"
	RegPodSecurityPin = "pod-security-pin"
	RegCertificate    = "certificate"
	RegImagePin       = "image-pin"
	RegPolicyUnread   = "policy-unread"
	RegPatch          = "patch-level"
	// RegAdmissionConfig: an admission control configured weaker than at
	// the baseline (admissionconfig.go).
	RegAdmissionConfig = "admission-config"
)

// unreadAdmissionConfig keys PolicyEvidence.Unread when the admission
// configuration could not be read.
const unreadAdmissionConfig = "admission-config"

// unreadCSRs keys PolicyEvidence.Unread when the CSRs could not be listed.
const unreadCSRs = "certificatesigningrequests"

// verifyPolicy compares the policy evidence of the baseline with now's.
// A baseline without policy evidence (saved by a preflight that did not
// record it, or edited) cannot show that a control still holds: UNKNOWN.
func verifyPolicy(base, now Evidence, opts VerifyOptions) []Regression {
	out := verifyPodSecurityPins(base, now)
	b, n := base.Policy, now.Policy
	if b == nil {
		return append(out, Regression{Kind: RegPolicyUnread, Status: StatusUnknown, Object: "baseline",
			Message: "the baseline has no policy evidence (admission probes and configuration, RBAC, certificates), so no security control can be compared: save a new one with kubectl skew preflight --save",
			Command: "kubectl skew preflight --target v" + base.Target + " --save FILE"})
	}
	if n == nil {
		return append(out, Regression{Kind: RegPolicyUnread, Status: StatusUnknown, Object: "policy", Message: "the policy gates did not run now, so no security control can be compared"})
	}
	var unchanged map[string]bool
	switch {
	case b.Admission != nil && n.Admission == nil:
		out = append(out, Regression{Kind: RegPolicyUnread, Status: StatusUnknown, Object: unreadAdmissionConfig,
			Message: "the admission configuration was recorded at the baseline and cannot be read now, so a weakened webhook or policy cannot be ruled out: " + n.Unread[unreadAdmissionConfig]})
	case b.Admission != nil:
		var regs []Regression
		regs, unchanged = verifyAdmissionConfig(b.Admission, n.Admission)
		out = append(out, regs...)
		for _, p := range b.PodSecurity {
			for _, q := range n.PodSecurity {
				if p == q {
					unchanged["namespace/"+p.Namespace] = true
				}
			}
		}
	}
	out = append(out, verifyProbes(b, n, func(ref string) bool { return unchanged[ref] })...)
	switch {
	case b.RBAC != nil && n.RBAC == nil:
		out = append(out, Regression{Kind: RegPolicyUnread, Status: StatusUnknown, Object: GateRBAC,
			Message: "RBAC was recorded at the baseline and cannot be read now, so new grants cannot be ruled out: " + n.Unread[GateRBAC]})
	case b.RBAC != nil:
		out = append(out, verifyRBAC(b.RBAC, n.RBAC, opts.AllowGrants)...)
	}
	out = append(out, verifyCerts(b, n, base.CollectedAt, now.CollectedAt)...)
	out = append(out, verifyCSRs(b, n, now.CollectedAt, opts.Settle)...)
	out = append(out, verifyPatch(b, n, base.Target)...)
	return append(out, verifyImages(b, n)...)
}
