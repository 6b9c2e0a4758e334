package preflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ProbeResult is what the apiserver did with a probe.
type ProbeResult string

// Probe results.
const (
	// ProbeDenied: denied by the control the probe tests (for a probe
	// file, by whatever denied it at the baseline).
	ProbeDenied ProbeResult = "denied"
	// ProbeAdmitted: admission let it through (a dry run: nothing stored).
	ProbeAdmitted ProbeResult = "admitted"
	// ProbeMasked: denied, but by another control that ran first, so the
	// probe says nothing of its own control.
	ProbeMasked ProbeResult = "denied-by-other"
	// ProbeUnknown: no verdict (forbidden to us, a webhook that failed or
	// did not answer in time, a dry run a webhook refuses).
	ProbeUnknown ProbeResult = "unknown"
	// ProbeGone: the namespace it is created in no longer exists.
	ProbeGone ProbeResult = "gone"
)

// Deniers of the built-in probes, as classifyDenial names them.
const (
	DeniedByPodSecurity = "PodSecurity"
	deniedByOther       = "another admission plugin"
)

// Probe is one dry-run create and its outcome.
type Probe struct {
	// ID is stable across preflight and verify.
	ID string `json:"id"`
	// Control is what the probe tests, in words.
	Control string `json:"control"`
	// Ref names the control as kind/name.
	Ref string `json:"ref"`
	// Check is the command that shows the control.
	Check string `json:"check,omitempty"`
	// Expect is the denier that counts: PodSecurity, webhook "NAME",
	// ValidatingAdmissionPolicy "NAME"; empty for a probe file, where any
	// denier counts at the baseline and the same one must deny later.
	Expect string `json:"expect,omitempty"`
	// Resource is the plural resource; the group and version are the
	// object's apiVersion.
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Variant   string `json:"variant,omitempty"`
	// Accept are the other deniers whose denial of this probe counts: the
	// controls that denied the same object at the baseline. When several
	// controls deny an object, which one the apiserver names is not
	// fixed: it builds its ValidatingAdmissionPolicy list by ranging a Go
	// map and reports the first denial (k8s.io/apiserver@v0.37.2
	// pkg/admission/plugin/policy/generic/policy_source.go,
	// refreshPolicies; pkg/admission/plugin/policy/validating/dispatcher.go,
	// deniedDecisions[0]), and it calls the validating webhooks in
	// parallel and returns the error that arrived first
	// (pkg/admission/plugin/webhook/validating/dispatcher.go, errs[0]).
	Accept []string `json:"accept,omitempty"`
	// Result, the denier and the apiserver's message.
	Result   ProbeResult `json:"result"`
	DeniedBy string      `json:"deniedBy,omitempty"`
	Message  string      `json:"message,omitempty"`
	// Object is what was sent; kept for the probes denied by their
	// control, which verify sends again.
	Object map[string]any `json:"object,omitempty"`
}

// Messages of the apiserver that name who denied a request, at
// k8s.io/apiserver@v0.37.2: pkg/admission/plugin/webhook/errors/statuserror.go
// (ToStatusErr, NewDryRunUnsupportedErr), pkg/util/webhook/error.go
// (ErrCallingWebhook), pkg/admission/plugin/policy/validating/dispatcher.go
// (a ValidatingAdmissionPolicy's denial), and at
// k8s.io/pod-security-admission@v0.37.2 admission/admission.go (PodSecurity).
var (
	reWebhookDenied   = regexp.MustCompile(`admission webhook "([^"]+)" denied the request`)
	reWebhookNoDryRun = regexp.MustCompile(`admission webhook "([^"]+)" does not support dry run`)
	reWebhookFailed   = regexp.MustCompile(`failed calling webhook "([^"]+)"`)
	rePolicyDenied    = regexp.MustCompile(`ValidatingAdmissionPolicy '([^']+)'(?: with binding '([^']+)')? denied request`)
	rePodSecurity     = regexp.MustCompile(`violates PodSecurity "([^"]+)"`)
	reRBACForbidden   = regexp.MustCompile(`cannot (\S+) resource "([^"]+)"`)
)

// WebhookDenier and PolicyDenier name a denier as Probe.Expect does.
func WebhookDenier(name string) string { return fmt.Sprintf("webhook %q", name) }

// PolicyDenier names a ValidatingAdmissionPolicy denier.
func PolicyDenier(name string) string { return fmt.Sprintf("ValidatingAdmissionPolicy %q", name) }

// classify records the apiserver's answer to a probe.
func classify(p *Probe, err error) {
	p.Result, p.DeniedBy, p.Message = ProbeUnknown, "", ""
	if err == nil || apierrors.IsAlreadyExists(err) {
		// AlreadyExists comes from storage, after admission let it through.
		p.Result = ProbeAdmitted
		return
	}
	msg := oneLine(err.Error())
	p.Message = msg
	var denier string
	switch {
	case reWebhookNoDryRun.MatchString(msg):
		p.Message = fmt.Sprintf("webhook %q refuses dry runs (sideEffects Some or Unknown): %s", reWebhookNoDryRun.FindStringSubmatch(msg)[1], msg)
		return
	case reWebhookFailed.MatchString(msg):
		return
	case reWebhookDenied.MatchString(msg):
		denier = WebhookDenier(reWebhookDenied.FindStringSubmatch(msg)[1])
	case rePolicyDenied.MatchString(msg):
		denier = PolicyDenier(rePolicyDenied.FindStringSubmatch(msg)[1])
	case rePodSecurity.MatchString(msg):
		denier = DeniedByPodSecurity
	case timedOut(err):
		p.Message = "no answer within the request timeout (--request-timeout): " + msg
		return
	case apierrors.IsForbidden(err) && reRBACForbidden.MatchString(msg):
		m := reRBACForbidden.FindStringSubmatch(msg)
		where := "at the cluster scope"
		if p.Namespace != "" {
			where = "in namespace " + p.Namespace
		}
		p.Message = fmt.Sprintf("forbidden: cannot %s %s %s (a dry-run create needs the create verb: deploy/rbac/skew-probes.yaml)", m[1], m[2], where)
		return
	case apierrors.IsNotFound(err):
		p.Result = ProbeGone
		return
	case apierrors.IsInvalid(err):
		p.Message = "the probe object is not valid, so admission never saw it: " + msg
		return
	case apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
		denier = deniedByOther
	default:
		return
	}
	p.DeniedBy = denier
	if p.Expect == "" || p.Expect == denier {
		p.Result = ProbeDenied
		return
	}
	for _, a := range p.Accept {
		if a == denier {
			p.Result = ProbeDenied
			return
		}
	}
	p.Result = ProbeMasked
}

// timedOut reports an answer that did not come in time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		(errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "Client.Timeout exceeded")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// runProbes dry-run creates every probe, a few at a time, and records
// each answer. Nothing is stored: every create carries dryRun=All.
func (r *Runner) runProbes(ctx context.Context, probes []Probe) {
	workers := r.Policy.ProbeWorkers
	if workers <= 0 {
		workers = 8
	}
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range probes {
		p := &probes[i]
		if p.Result != "" {
			continue // already judged (a probe file's kind not served)
		}
		g.Go(func() error {
			if r.Dynamic == nil {
				p.Result, p.Message = ProbeUnknown, "no dynamic client to send the dry run with"
				return nil
			}
			classify(p, dryRunCreate(ctx, r.Dynamic, p))
			return nil
		})
	}
	_ = g.Wait()
}

// DryRunFieldManager is the field manager of the probes' dry runs.
const DryRunFieldManager = "kubectl-skew-probe"

func dryRunCreate(ctx context.Context, dyn dynamic.Interface, p *Probe) error {
	// Create encodes the object and does not change it.
	obj := &unstructured.Unstructured{Object: p.Object}
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		return fmt.Errorf("probe object apiVersion %q: %w", obj.GetAPIVersion(), err)
	}
	res := dyn.Resource(gv.WithResource(p.Resource))
	var ri dynamic.ResourceInterface = res
	if p.Namespace != "" {
		ri = res.Namespace(p.Namespace)
	}
	_, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: DryRunFieldManager})
	return err
}
