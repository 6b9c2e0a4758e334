package eviction

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Outcome says whether an eviction succeeds now, later (after waiting for
// something that clears on its own) or never (until someone changes the
// cluster). Ignored means a drain does not evict the pod at all.
type Outcome string

// Outcomes, from best to worst.
const (
	// OutcomeNow means the eviction is (or would be) accepted right away.
	OutcomeNow Outcome = "Now"
	// OutcomeIgnored means a drain leaves the pod alone (DaemonSet and
	// mirror pods).
	OutcomeIgnored Outcome = "Ignored"
	// OutcomeLater means the eviction is refused for now and will be
	// accepted once something clears by itself (replacements become
	// healthy, the PDB controller catches up).
	OutcomeLater Outcome = "Later"
	// OutcomeNever means the eviction will be refused until someone changes
	// the cluster (a PDB, a workload, an annotation).
	OutcomeNever Outcome = "Never"
	// OutcomeUnknown means the answer could not be worked out (for example
	// the PodDisruptionBudgets of the pod's namespace could not be read).
	OutcomeUnknown Outcome = "Unknown"
)

// Status is the outcome's word in a table's STATUS column: OK (evicts
// now), WAIT (later), BLOCKED (never, until someone acts), UNKNOWN, and
// SKIP for a pod a drain leaves alone. JSON writes the same word in lower
// case (MarshalText).
func (o Outcome) Status() cli.Status {
	switch o {
	case OutcomeNow:
		return cli.StatusOK
	case OutcomeIgnored:
		return cli.StatusSkip
	case OutcomeLater:
		return cli.StatusWait
	case OutcomeNever:
		return cli.StatusBlocked
	}
	return cli.StatusUnknown
}

// MarshalText writes the outcome as every report's JSON and YAML do: its
// status word in lower case ("ok", "skip", "wait", "blocked", "unknown").
func (o Outcome) MarshalText() ([]byte, error) {
	if o == "" {
		return nil, nil
	}
	return []byte(o.Status().JSONWord()), nil
}

// UnmarshalText reads an outcome as MarshalText writes it, or as reports
// of gpufleet.dev/v1alpha1 and drain state written by earlier releases did
// ("Now", "Later", "Never", ...).
func (o *Outcome) UnmarshalText(b []byte) error {
	w := string(b)
	for _, out := range []Outcome{OutcomeNow, OutcomeIgnored, OutcomeLater, OutcomeNever, OutcomeUnknown} {
		if w == string(out) || w == out.Status().JSONWord() {
			*o = out
			return nil
		}
	}
	if w == "" {
		*o = ""
		return nil
	}
	return fmt.Errorf("outcome %q is not one of ok, skip, wait, blocked, unknown", w)
}

// OutcomeStatuses are the status words Status returns, for a command's
// legend.
var OutcomeStatuses = []cli.Status{cli.StatusOK, cli.StatusSkip, cli.StatusWait, cli.StatusUnknown, cli.StatusBlocked}

func (o Outcome) rank() int {
	switch o {
	case OutcomeNow:
		return 0
	case OutcomeIgnored:
		return 1
	case OutcomeLater:
		return 2
	case OutcomeUnknown:
		return 3
	case OutcomeNever:
		return 4
	}
	return 3
}

// Worse returns the worse of two outcomes (Never > Unknown > Later >
// Ignored > Now).
func Worse(a, b Outcome) Outcome {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// Reason names how the API server answered (or would answer) an eviction.
type Reason string

// Reasons for an eviction answer. Each maps to one branch of the API
// server's eviction handler.
const (
	// ReasonEvicted: the server accepted the eviction (HTTP 201).
	ReasonEvicted Reason = "Evicted"
	// ReasonPodGone: the pod no longer exists (404); a drain counts it done.
	ReasonPodGone Reason = "PodGone"
	// ReasonBudgetExhausted: the PDB allows no disruption now (429,
	// "needs X healthy pods and has Y currently").
	ReasonBudgetExhausted Reason = "BudgetExhausted"
	// ReasonPDBStale: the PDB's status lags its spec (observedGeneration
	// behind generation) or changed under the server (429 with Retry-After,
	// "is still being processed by the server").
	ReasonPDBStale Reason = "PDBStale"
	// ReasonPDBSyncFailed: the PDB controller cannot compute the budget
	// (429, "failed sync"), for example a percentage or maxUnavailable PDB
	// over pods whose owner has no /scale subresource.
	ReasonPDBSyncFailed Reason = "PDBSyncFailed"
	// ReasonMultiplePDBs: more than one PDB selects the pod (500); the
	// eviction API refuses such pods forever.
	ReasonMultiplePDBs Reason = "MultiplePDBs"
	// ReasonNegativeBudget: the PDB's disruptionsAllowed is negative (403).
	ReasonNegativeBudget Reason = "NegativeBudget"
	// ReasonTooManyUnconfirmed: more than 2000 evictions under the PDB are
	// not yet confirmed by the PDB controller (403); clears as it catches up.
	ReasonTooManyUnconfirmed Reason = "TooManyUnconfirmedDisruptions"
	// ReasonNamespaceTerminating: the pod's namespace is being deleted (403
	// with cause NamespaceTerminating); the pod goes away with it.
	ReasonNamespaceTerminating Reason = "NamespaceTerminating"
	// ReasonForbidden: the caller may not evict the pod (403 from RBAC or an
	// admission webhook).
	ReasonForbidden Reason = "Forbidden"
	// ReasonThrottled: the server is shedding load (429 without a
	// disruption-budget cause, 503).
	ReasonThrottled Reason = "Throttled"
	// ReasonConflict: the PDB or pod kept changing under the server (409,
	// or a 504 "couldn't update PodDisruptionBudget due to conflicts").
	ReasonConflict Reason = "Conflict"
	// ReasonTimeout: the request timed out (network or server timeout).
	ReasonTimeout Reason = "Timeout"
	// ReasonCanceled: the caller's context was canceled or its deadline
	// passed before the server answered.
	ReasonCanceled Reason = "Canceled"
	// ReasonError: any other error.
	ReasonError Reason = "Error"
)

// Result is the classified answer of the API server to one eviction, or
// the Evaluator's prediction of it. The same type serves both, so a
// prediction can be compared with what the server then says.
type Result struct {
	// Reason classifies the answer.
	Reason Reason `json:"reason"`
	// Code is the HTTP status code (201 for an accepted eviction, 0 when no
	// answer came back).
	Code int32 `json:"code"`
	// Message is the server's message (or the one it would send).
	Message string `json:"message,omitempty"`
	// PDB names the PodDisruptionBudget behind the answer, when known.
	PDB string `json:"pdb,omitempty"`
	// DesiredHealthy and CurrentHealthy are the numbers in "needs X healthy
	// pods and has Y currently", when the server gave them.
	DesiredHealthy *int32 `json:"desiredHealthy,omitempty"`
	CurrentHealthy *int32 `json:"currentHealthy,omitempty"`
	// RetryAfter is the server's Retry-After suggestion (0 when none).
	RetryAfter time.Duration `json:"-"`
	// RetryAfterSeconds is RetryAfter in whole seconds, for reports.
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
	// DryRun is true when the request was a server-side dry run.
	DryRun bool `json:"dryRun,omitempty"`
	// Err is the error the client returned (nil on success).
	Err error `json:"-"`
}

// Evicted reports whether the eviction was accepted or the pod is already
// gone: either way a drain may move on to waiting for deletion.
func (r Result) Evicted() bool { return r.Reason == ReasonEvicted || r.Reason == ReasonPodGone }

// Outcome says whether this answer can change by waiting.
func (r Result) Outcome() Outcome {
	switch r.Reason {
	case ReasonEvicted, ReasonPodGone:
		return OutcomeNow
	case ReasonBudgetExhausted, ReasonPDBStale, ReasonTooManyUnconfirmed, ReasonNamespaceTerminating,
		ReasonThrottled, ReasonConflict, ReasonTimeout:
		return OutcomeLater
	case ReasonCanceled:
		return OutcomeUnknown
	default:
		return OutcomeNever
	}
}

// Retryable reports whether retrying the same eviction can succeed without
// anyone changing the cluster. A budget that is exhausted for structural
// reasons (minAvailable equal to the replica count) still reads as
// retryable here, because the server's answer does not tell the two apart;
// the Evaluator does.
func (r Result) Retryable() bool { return r.Outcome() == OutcomeLater }

// Error renders the result as a one-line error, naming the pod.
func (r Result) Error(pod string) error {
	if r.Evicted() {
		return nil
	}
	msg := r.Message
	if msg == "" && r.Err != nil {
		msg = r.Err.Error()
	}
	if r.PDB != "" && !strings.Contains(msg, r.PDB) {
		msg = fmt.Sprintf("PodDisruptionBudget %s: %s", r.PDB, msg)
	}
	return &refusedError{msg: fmt.Sprintf("eviction of pod %s refused (%s): %s", pod, r.Reason, msg), err: r.Err}
}

// refusedError is a refused eviction: it reads as one line and unwraps to
// the client's error, so that callers can still ask apierrors whether the
// server said Forbidden.
type refusedError struct {
	msg string
	err error
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.err }

// Classify turns the error returned by an eviction request into a Result.
// A nil error is an accepted eviction.
func Classify(err error) Result {
	if err == nil {
		return Result{Reason: ReasonEvicted, Code: http.StatusCreated}
	}
	r := Result{Err: err, Message: err.Error()}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		r.Reason = ReasonCanceled
		return r
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		r.Reason = ReasonError
		if isTimeout(err) {
			r.Reason = ReasonTimeout
		}
		return r
	}
	st := se.Status()
	r.Code = st.Code
	if st.Message != "" {
		r.Message = st.Message
	}
	if secs, ok := apierrors.SuggestsClientDelay(err); ok && secs > 0 {
		r.RetryAfter = time.Duration(secs) * time.Second
		r.RetryAfterSeconds = int32(secs)
	}
	budgetMsg := ""
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				budgetMsg = c.Message
			}
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		r.Reason = ReasonPodGone
	case apierrors.IsTooManyRequests(err):
		r.classifyTooManyRequests(budgetMsg)
	case st.Code == http.StatusInternalServerError && strings.Contains(st.Message, "more than one PodDisruptionBudget"):
		r.Reason = ReasonMultiplePDBs
	case apierrors.IsForbidden(err):
		switch {
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			r.Reason = ReasonNamespaceTerminating
		case strings.Contains(budgetMsg, "disruptions allowed is negative") || strings.Contains(st.Message, "disruptions allowed is negative"):
			r.Reason = ReasonNegativeBudget
		case budgetMsg != "" || strings.Contains(st.Message, "DisruptedPods map too big"):
			r.Reason = ReasonTooManyUnconfirmed
		default:
			r.Reason = ReasonForbidden
		}
		if budgetMsg != "" && st.Details != nil {
			r.PDB = st.Details.Name
			r.Message = budgetMsg
		}
	case apierrors.IsConflict(err):
		r.Reason = ReasonConflict
	case apierrors.IsTimeout(err) && strings.Contains(st.Message, "due to conflicts"):
		r.Reason = ReasonConflict
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		r.Reason = ReasonTimeout
	case apierrors.IsServiceUnavailable(err):
		r.Reason = ReasonThrottled
	default:
		r.Reason = ReasonError
	}
	return r
}

func (r *Result) classifyTooManyRequests(budgetMsg string) {
	var name string
	var desired, current int32
	switch {
	case budgetMsg == "":
		r.Reason = ReasonThrottled
		return
	case strings.Contains(budgetMsg, "is still being processed"):
		r.Reason = ReasonPDBStale
		_, _ = fmt.Sscanf(budgetMsg, "The disruption budget %s is still being processed", &name)
	case strings.Contains(budgetMsg, "failed sync"):
		r.Reason = ReasonPDBSyncFailed
		_, _ = fmt.Sscanf(budgetMsg, "The disruption budget %s does not allow", &name)
	default:
		r.Reason = ReasonBudgetExhausted
		if n, _ := fmt.Sscanf(budgetMsg, "The disruption budget %s needs %d healthy pods and has %d currently", &name, &desired, &current); n == 3 {
			r.DesiredHealthy, r.CurrentHealthy = &desired, &current
		} else {
			_, _ = fmt.Sscanf(budgetMsg, "The disruption budget %s does not allow", &name)
		}
	}
	r.PDB = name
	r.Message = budgetMsg
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
