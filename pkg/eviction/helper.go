package eviction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/clock"
)

// Defaults NewHelper fills in. They are exported so callers can show them in
// help text.
const (
	// DefaultRetryDelay is the first wait after a refusal that carries no
	// Retry-After; later waits double up to DefaultMaxRetryDelay.
	DefaultRetryDelay = 5 * time.Second
	// DefaultMaxRetryDelay caps the backoff between attempts.
	DefaultMaxRetryDelay = time.Minute
	// DefaultChunkSize is the page size of pod lists.
	DefaultChunkSize = 500
	// KeepPodGracePeriod as GracePeriodSeconds keeps each pod's own
	// terminationGracePeriodSeconds.
	KeepPodGracePeriod = -1
)

// ErrDeadline is wrapped by Evict errors when the
// caller's deadline (Helper.Timeout or the context's) ended the wait.
var ErrDeadline = errors.New("deadline reached")

// Helper evicts pods through the eviction API. Like kubectl's
// drain.Helper it is a plain struct with exported fields and callbacks; build
// it with NewHelper so that the fields whose zero value is unsafe (grace
// period 0 deletes at once, retry delay 0 hammers the server) start safe.
type Helper struct {
	// Client talks to the cluster.
	Client kubernetes.Interface
	// Clock times backoff and deadlines (clock.RealClock{} in production,
	// a fake clock in tests).
	Clock clock.WithTicker

	// GracePeriodSeconds is sent with each eviction. KeepPodGracePeriod (-1)
	// keeps the pod's own terminationGracePeriodSeconds; 0 kills at once.
	GracePeriodSeconds int
	// RetryDelay is the first wait after a retryable refusal without a
	// Retry-After; each further refusal doubles it, up to MaxRetryDelay.
	// A Retry-After from the server is always honoured.
	RetryDelay time.Duration
	// MaxRetryDelay caps the doubling backoff.
	MaxRetryDelay time.Duration
	// Timeout bounds Evict for one pod (0: only the
	// context's deadline). A wait that would end past the deadline is not
	// started: the last refusal is returned at once, wrapped with
	// ErrDeadline.
	Timeout time.Duration
	// DryRun sends evictions with dryRun=All: the server runs every check
	// but neither spends the budget nor deletes the pod.
	DryRun bool
	// ShouldRetry decides which refusals Evict retries. Nil retries those
	// whose Outcome is OutcomeLater (Result.Retryable).
	ShouldRetry func(Result) bool

	// IgnoreDaemonSets, DeleteEmptyDirData and Force configure the pod
	// filters of PodsForDeletion exactly like kubectl drain's flags of the
	// same names.
	IgnoreDaemonSets   bool
	DeleteEmptyDirData bool
	Force              bool
	// ChunkSize is the page size of pod lists (0: DefaultChunkSize).
	ChunkSize int64

	// OnAttempt is called before each eviction request (attempt counts from 1).
	OnAttempt func(pod *corev1.Pod, attempt int)
	// OnRefused is called after a refusal that will be retried, with the
	// wait before the next attempt.
	OnRefused func(pod *corev1.Pod, r Result, retryIn time.Duration)
	// OnEvicted is called once per Evict with the final result, accepted or not.
	OnEvicted func(pod *corev1.Pod, r Result)
}

// NewHelper returns a Helper with safe defaults: the pod's own grace
// period, a 5s doubling backoff capped at 1m, a real clock and DaemonSet
// pods ignored.
func NewHelper(client kubernetes.Interface) *Helper {
	return &Helper{
		Client:             client,
		Clock:              clock.RealClock{},
		GracePeriodSeconds: KeepPodGracePeriod,
		RetryDelay:         DefaultRetryDelay,
		MaxRetryDelay:      DefaultMaxRetryDelay,
		IgnoreDaemonSets:   true,
		ChunkSize:          DefaultChunkSize,
	}
}

func (h *Helper) clock() clock.WithTicker {
	if h.Clock == nil {
		return clock.RealClock{}
	}
	return h.Clock
}

// Drain returns a kubectl drain.Helper configured from h, with every field
// whose zero value is unsafe set explicitly: the grace period, the retry
// delay, the timeout and the writers (io.Discard, since this package never
// prints).
func (h *Helper) Drain(ctx context.Context) *drain.Helper {
	chunk := h.ChunkSize
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	delay := h.RetryDelay
	if delay <= 0 {
		delay = DefaultRetryDelay
	}
	return &drain.Helper{
		Ctx:                  ctx,
		Client:               h.Client,
		Force:                h.Force,
		GracePeriodSeconds:   h.GracePeriodSeconds,
		IgnoreAllDaemonSets:  h.IgnoreDaemonSets,
		DeleteEmptyDirData:   h.DeleteEmptyDirData,
		Timeout:              h.Timeout,
		ChunkSize:            chunk,
		EvictErrorRetryDelay: delay,
		Out:                  io.Discard,
		ErrOut:               io.Discard,
	}
}

// PodsForDeletion lists the pods on a node and runs kubectl drain's filters
// over them (DaemonSet, mirror, emptyDir, unreplicated and finished pods).
// Pods() of the list are the ones a drain evicts; the errors name the pods
// that stop a drain with the current flags.
func (h *Helper) PodsForDeletion(ctx context.Context, node string) (*drain.PodDeleteList, []error) {
	return h.Drain(ctx).GetPodsForDeletion(node)
}

// EvictOnce sends one eviction request for pod and classifies the answer.
// The request carries the pod's UID as a precondition, so a pod recreated
// under the same name (a StatefulSet replica) is never evicted by mistake;
// such a mismatch reads as ReasonPodGone.
func (h *Helper) EvictOnce(ctx context.Context, pod *corev1.Pod) Result {
	opts := &metav1.DeleteOptions{}
	if h.GracePeriodSeconds >= 0 {
		g := int64(h.GracePeriodSeconds)
		opts.GracePeriodSeconds = &g
	}
	if pod.UID != "" {
		uid := pod.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if h.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: opts,
	}
	err := h.post(ctx, ev)
	r := Classify(err)
	if r.Reason == ReasonConflict && apierrors.IsConflict(err) && strings.Contains(r.Message, "UID in the precondition") {
		r.Reason = ReasonPodGone
	}
	r.DryRun = h.DryRun
	return r
}

// post sends the eviction. client-go retries a 429 that carries Retry-After
// by itself, up to ten times and sleeping each time, which would hide the
// refusal from the caller and overrun its deadline (a PDB whose status is
// behind answers Retry-After: 10, so one call blocks for 100s). With a real
// REST client the request is sent with retries off; the backoff here decides.
func (h *Helper) post(ctx context.Context, ev *policyv1.Eviction) error {
	if rc, ok := h.Client.PolicyV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.Post().AbsPath("/api/v1").Namespace(ev.Namespace).Resource("pods").Name(ev.Name).
			SubResource("eviction").MaxRetries(0).Body(ev).Do(ctx).Error()
	}
	return h.Client.PolicyV1().Evictions(ev.Namespace).Evict(ctx, ev)
}

// Evict evicts pod, retrying refusals that ShouldRetry accepts with a
// backoff that honours Retry-After, until the eviction is accepted, a
// refusal is final, or the deadline (Timeout or the context's) comes. The
// error is nil exactly when the result is Evicted(); it wraps ErrDeadline
// when the deadline stopped the retries. OnEvicted sees the final result.
func (h *Helper) Evict(ctx context.Context, pod *corev1.Pod) (Result, error) {
	clk := h.clock()
	deadline, hasDeadline := h.deadline(ctx, clk.Now())
	retry := h.ShouldRetry
	if retry == nil {
		retry = Result.Retryable
	}
	backoff := h.RetryDelay
	if backoff <= 0 {
		backoff = DefaultRetryDelay
	}
	maxDelay := h.MaxRetryDelay
	if maxDelay < backoff {
		maxDelay = backoff
	}
	name := pod.Namespace + "/" + pod.Name
	finish := func(r Result, err error) (Result, error) {
		if h.OnEvicted != nil {
			h.OnEvicted(pod, r)
		}
		return r, err
	}
	for attempt := 1; ; attempt++ {
		if h.OnAttempt != nil {
			h.OnAttempt(pod, attempt)
		}
		r := h.EvictOnce(ctx, pod)
		if r.Evicted() {
			return finish(r, nil)
		}
		if r.Reason == ReasonCanceled || ctx.Err() != nil {
			return finish(r, fmt.Errorf("eviction of pod %s: %w", name, context.Cause(ctx)))
		}
		if !retry(r) {
			return finish(r, r.Error(name))
		}
		wait := backoff
		if r.RetryAfter > 0 {
			wait = r.RetryAfter
		} else {
			backoff = min(backoff*2, maxDelay)
		}
		if hasDeadline && clk.Now().Add(wait).After(deadline) {
			return finish(r, fmt.Errorf("%w: %w", ErrDeadline, r.Error(name)))
		}
		if h.OnRefused != nil {
			h.OnRefused(pod, r, wait)
		}
		if err := sleep(ctx, clk, wait); err != nil {
			return finish(r, fmt.Errorf("eviction of pod %s: %w", name, err))
		}
	}
}

func isTransient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || isTimeout(err)
}

func (h *Helper) deadline(ctx context.Context, now time.Time) (time.Time, bool) {
	var d time.Time
	ok := false
	if h.Timeout > 0 {
		d, ok = now.Add(h.Timeout), true
	}
	// The context's deadline is on the real clock; translate it to the
	// remaining time on ours.
	if cd, has := ctx.Deadline(); has {
		left := time.Until(cd)
		if c := now.Add(left); !ok || c.Before(d) {
			d, ok = c, true
		}
	}
	return d, ok
}

func sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C():
		return nil
	}
}
