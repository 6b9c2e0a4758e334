package crdmigrate

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

// PreflightError refuses a run before any write: a webhook the reads or
// writes depend on is down, or a server-side dry-run write of an object
// failed.
type PreflightError struct {
	CRD      string
	Problems []string
	// Hint is a command that shows the first problem.
	Hint string
}

func (e *PreflightError) Error() string {
	return fmt.Sprintf("pre-flight check of %s failed, nothing was changed: %s", e.CRD, strings.Join(e.Problems, "; "))
}

// readRetry retries the reads (and the dry-run write) of status and of the
// pre-flight checks when no answer came at all, as while an apiserver
// restarts, for up to a minute. An answer, even an error or a timeout, is
// final: a conversion webhook that hangs is reported at once rather than
// after minutes of retries, and client-go already waits out a 429's
// Retry-After.
var readRetry = transient.Policy{Budget: time.Minute, Retryable: transient.Unreachable}

// Plan is what a run of one CRD would do, as found by Preflight.
type Plan struct {
	Status CRDStatus `json:"status"`
	// Probe says how the dry-run write went ("" when there was nothing to
	// probe).
	Probe string `json:"probe,omitempty"`
}

// Preflight checks one CRD before a run: it counts the objects, checks the
// conversion and admission webhooks (Service endpoints ready), and, when
// there are objects, reads one at the storage version and sends it back as a
// server-side dry-run update (dryRun=All), which goes through conversion and
// every matching admission webhook (admissionregistration/v1 webhooks
// declare no side effects, so they are called on dry runs) and changes
// nothing. It returns *PreflightError when the run would fail.
func Preflight(ctx context.Context, c Clients, hooks *Webhooks, crd *apiextv1.CustomResourceDefinition) (*Plan, error) {
	return runPreflight(ctx, c, hooks, crd, true)
}

// PreflightReadOnly is Preflight without the dry-run write: it reads one
// object instead of sending it back, so only the webhooks' endpoints and
// the reads through the conversion webhook are checked.
func PreflightReadOnly(ctx context.Context, c Clients, hooks *Webhooks, crd *apiextv1.CustomResourceDefinition) (*Plan, error) {
	return runPreflight(ctx, c, hooks, crd, false)
}

func runPreflight(ctx context.Context, c Clients, hooks *Webhooks, crd *apiextv1.CustomResourceDefinition, write bool) (*Plan, error) {
	st := Describe(crd)
	h, err := hooks.Check(ctx, c.Kube, crd)
	if err != nil {
		return nil, err
	}
	st.ConversionWebhook, st.Webhooks = h.Conversion, h.Admission
	n, countErr := CountObjects(ctx, c, crd)
	if countErr != nil {
		n, st.CountError = -1, countErr.Error()
	}
	st.Objects = n
	st.Verdict, st.Reasons = verdict(st)
	plan := &Plan{Status: st}
	if n == 0 {
		return plan, nil
	}
	var problems []string
	hint := ""
	for _, b := range Blockers(st) {
		problems = append(problems, b.Problem())
		if hint == "" {
			hint = hintFor(b)
		}
	}
	// A conversion webhook that does not answer shows up as reads and
	// writes that time out; say so.
	cw := conversionWebhookOf(crd)
	if countErr != nil {
		problems = append(problems, cw.explain(countErr, false).Error())
		return plan, &PreflightError{CRD: crd.Name, Problems: problems, Hint: hint}
	}
	gvr := GVR(crd)
	var l *unstructured.UnstructuredList
	err = readRetry.Do(ctx, func() (err error) {
		l, err = c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("reading %s at %s failed: %v", gvr.Resource, gvr.Version, cw.explain(err, false)))
		plan.Probe = "list failed"
	case len(l.Items) == 0:
		plan.Probe = "no object to probe"
	case !write:
		plan.Probe = "read " + objectRef(l.Items[0].GetNamespace(), l.Items[0].GetName()) + "; no dry-run update sent (--dry-run=client)"
	default:
		obj := &l.Items[0]
		ref := objectRef(obj.GetNamespace(), obj.GetName())
		ri := c.Dynamic.Resource(gvr)
		var res dynamic.ResourceInterface = ri
		if ns := obj.GetNamespace(); ns != "" {
			res = ri.Namespace(ns)
		}
		// A dry run changes nothing, so it is as safe to send again as a read.
		err := readRetry.Do(ctx, func() error {
			_, err := res.Update(ctx, obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: ManagedBy})
			return err
		})
		if err != nil && !isObjectNotFound(err, obj.GetName()) {
			problems = append(problems, fmt.Sprintf("a dry-run update of %s %s failed: %v", gvr.Resource, ref, cw.explain(err, false)))
			plan.Probe = "dry-run update failed"
		} else {
			plan.Probe = "dry-run update of " + ref + " ok"
		}
	}
	if len(problems) > 0 {
		return plan, &PreflightError{CRD: crd.Name, Problems: problems, Hint: hint}
	}
	return plan, nil
}

func hintFor(h WebhookHealth) string {
	if h.ServiceName == "" {
		return ""
	}
	if h.Detail == "service not found" {
		return fmt.Sprintf("kubectl get service -n %s %s", h.ServiceNamespace, h.ServiceName)
	}
	return fmt.Sprintf("kubectl get endpointslices -n %s -l kubernetes.io/service-name=%s", h.ServiceNamespace, h.ServiceName)
}

// Estimate is the expected cost of a client-side run.
type Estimate struct {
	Objects  int64 `json:"objects"`
	Requests int64 `json:"requests"`
	// Seconds is the time the requests take at the rate limit, ignoring
	// server latency.
	Seconds float64 `json:"seconds"`
}

// EstimateRun counts the requests of a client-side run over n objects (one
// update each, one list and one checkpoint write per page, and a handful
// around them) and the time they take at qps with burst.
func EstimateRun(n int64, pageSize int64, qps float64, burst int) Estimate {
	if pageSize <= 0 {
		pageSize = PageSize
	}
	pages := max(1, (n+pageSize-1)/pageSize)
	req := n + 2*pages + 6
	e := Estimate{Objects: n, Requests: req}
	if qps > 0 {
		e.Seconds = math.Max(0, float64(req-int64(burst))) / qps
	}
	return e
}

// Duration returns the estimate as a duration.
func (e Estimate) Duration() time.Duration {
	return time.Duration(e.Seconds * float64(time.Second))
}
