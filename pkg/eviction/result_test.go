package eviction

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// The errors below are built the way the API server's eviction handler
// builds them (pkg/registry/core/pod/storage/eviction.go).

func budgetErr(msg string, retryAfter int) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", retryAfter)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
	return err
}

func exhaustedErr(pdb string, desired, current int) error {
	return budgetErr(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb, desired, current), 0)
}

func staleErr(pdb string) error {
	return budgetErr(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb), 10)
}

func syncFailedErr(pdb string) error {
	return budgetErr(fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: found no controllers for pod \"w-0\"", pdb), 0)
}

func multiplePDBErr() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}
}

func pdbForbidden(pdb, why, causeMsg string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudget"}, pdb, errors.New(why))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: causeMsg})
	return err
}

func negativeErr(pdb string) error {
	return pdbForbidden(pdb, "pdb disruptions allowed is negative",
		fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb))
}

func unconfirmedErr(pdb string) error {
	return pdbForbidden(pdb, "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
		fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller", pdb))
}

func rbacErr() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "w-0", errors.New(`User "dev" cannot create resource "pods/eviction"`))
}

func nsTerminatingErr() error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "w-0", errors.New("namespace ml is being terminated"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause})
	return err
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      Result
		outcome   Outcome
		retryable bool
	}{
		{name: "accepted", err: nil, want: Result{Reason: ReasonEvicted, Code: 201}, outcome: OutcomeNow},
		{name: "pod gone", err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "w-0"),
			want: Result{Reason: ReasonPodGone, Code: 404, Message: `pods "w-0" not found`}, outcome: OutcomeNow},
		{name: "budget exhausted", err: exhaustedErr("web", 3, 3),
			want: Result{Reason: ReasonBudgetExhausted, Code: 429, PDB: "web", DesiredHealthy: ptr.To[int32](3), CurrentHealthy: ptr.To[int32](3),
				Message: "The disruption budget web needs 3 healthy pods and has 3 currently"},
			outcome: OutcomeLater, retryable: true},
		{name: "pdb stale with retry-after", err: staleErr("web"),
			want: Result{Reason: ReasonPDBStale, Code: 429, PDB: "web", RetryAfter: 10 * time.Second, RetryAfterSeconds: 10,
				Message: "The disruption budget web is still being processed by the server."},
			outcome: OutcomeLater, retryable: true},
		{name: "pdb sync failed", err: syncFailedErr("crd-pdb"),
			want: Result{Reason: ReasonPDBSyncFailed, Code: 429, PDB: "crd-pdb",
				Message: `The disruption budget crd-pdb does not allow evicting pods currently because it failed sync: found no controllers for pod "w-0"`},
			outcome: OutcomeNever},
		{name: "more than one pdb", err: multiplePDBErr(),
			want: Result{Reason: ReasonMultiplePDBs, Code: 500,
				Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."},
			outcome: OutcomeNever},
		{name: "negative disruptions allowed", err: negativeErr("web"),
			want: Result{Reason: ReasonNegativeBudget, Code: 403, PDB: "web",
				Message: "The disruption budget web does not allow evicting pods currently: pdb disruptions allowed is negative"},
			outcome: OutcomeNever},
		{name: "too many unconfirmed disruptions", err: unconfirmedErr("web"),
			want: Result{Reason: ReasonTooManyUnconfirmed, Code: 403, PDB: "web",
				Message: "The disruption budget web does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller"},
			outcome: OutcomeLater, retryable: true},
		{name: "forbidden by rbac", err: rbacErr(),
			want:    Result{Reason: ReasonForbidden, Code: 403, Message: `pods/eviction "w-0" is forbidden: User "dev" cannot create resource "pods/eviction"`},
			outcome: OutcomeNever},
		{name: "namespace terminating", err: nsTerminatingErr(),
			want:    Result{Reason: ReasonNamespaceTerminating, Code: 403, Message: `pods/eviction "w-0" is forbidden: namespace ml is being terminated`},
			outcome: OutcomeLater, retryable: true},
		{name: "throttled by priority and fairness", err: apierrors.NewTooManyRequests("too many requests", 2),
			want:    Result{Reason: ReasonThrottled, Code: 429, RetryAfter: 2 * time.Second, RetryAfterSeconds: 2, Message: "too many requests"},
			outcome: OutcomeLater, retryable: true},
		{name: "pdb conflicts", err: apierrors.NewTimeoutError(`couldn't update PodDisruptionBudget "web" due to conflicts`, 10),
			want: Result{Reason: ReasonConflict, Code: 504, RetryAfter: 10 * time.Second, RetryAfterSeconds: 10,
				Message: `Timeout: couldn't update PodDisruptionBudget "web" due to conflicts`},
			outcome: OutcomeLater, retryable: true},
		{name: "canceled", err: fmt.Errorf("post: %w", context.Canceled),
			want: Result{Reason: ReasonCanceled, Message: "post: context canceled"}, outcome: OutcomeUnknown},
		{name: "other", err: errors.New("boom"), want: Result{Reason: ReasonError, Message: "boom"}, outcome: OutcomeNever},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.err)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Result{}, "Err")); diff != "" {
				t.Errorf("Classify() mismatch (-want +got):\n%s", diff)
			}
			if got.Outcome() != tc.outcome {
				t.Errorf("Outcome() = %s, want %s", got.Outcome(), tc.outcome)
			}
			if got.Retryable() != tc.retryable {
				t.Errorf("Retryable() = %v, want %v", got.Retryable(), tc.retryable)
			}
			if (got.Error("ml/w-0") == nil) != got.Evicted() {
				t.Errorf("Error() = %v with Evicted() = %v", got.Error("ml/w-0"), got.Evicted())
			}
		})
	}
}

func TestWorse(t *testing.T) {
	if got := Worse(OutcomeLater, OutcomeNever); got != OutcomeNever {
		t.Errorf("Worse(Later, Never) = %s", got)
	}
	if got := Worse(OutcomeLater, OutcomeIgnored); got != OutcomeLater {
		t.Errorf("Worse(Later, Ignored) = %s", got)
	}
}

// TestResultErrorUnwraps: the one-line error of a refused eviction keeps
// the server's error, so a caller can tell Forbidden (exit 3) apart.
func TestResultErrorUnwraps(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "w-0", errors.New("no"))
	err := Classify(forbidden).Error("ml/w-0")
	if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), "eviction of pod ml/w-0 refused (Forbidden)") {
		t.Errorf("error %q: IsForbidden %v", err, apierrors.IsForbidden(err))
	}
	wrapped := fmt.Errorf("drain incomplete: %w", err)
	if !apierrors.IsForbidden(wrapped) {
		t.Error("wrapping lost the server's answer")
	}
}
