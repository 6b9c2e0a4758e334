package gang

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// maxRetryBackoff caps the wait between two tries of a call that failed
// with a transient error (unless the poll interval is longer).
const maxRetryBackoff = 5 * time.Second

// transient reports whether err says the API server could not answer for
// now rather than that it refused: throttling (429), server errors and
// timeouts (5xx), and a connection refused, reset or cut short (EOF), as
// while kube-apiserver restarts. Every other answer (Forbidden, NotFound,
// Conflict, Invalid...) keeps its meaning, and so do errors that are not
// about the connection at all, such as an untrusted certificate.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError ||
			apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// A dial that failed (no listener, no route) or a request that timed out.
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}

// retry calls fn until it succeeds, fails with an error that is not
// transient, or ctx ends (the run's --timeout, or an interrupt); between
// tries it waits, from the poll interval doubling up to maxRetryBackoff,
// at least as long as a Retry-After the server sent, and reports each
// retry as a warning. It returns fn's last error.
func (d *Drainer) retry(ctx context.Context, fn func() error) error {
	return d.retryIf(ctx, func() (bool, error) { return true, fn() })
}

// retryIf is retry for calls that can tell an error is final although it
// reads as transient: fn returns whether its error may be retried.
func (d *Drainer) retryIf(ctx context.Context, fn func() (bool, error)) error {
	backoff := d.Options.poll()
	limit := max(maxRetryBackoff, backoff)
	for {
		may, err := fn()
		if err == nil || ctx.Err() != nil || !may || !transient(err) {
			return err
		}
		wait := backoff
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			wait = max(wait, min(time.Duration(s)*time.Second, limit))
		}
		d.emit(Event{Type: EventWarning, Message: fmt.Sprintf("%v; retrying in %s", err, wait.Round(time.Millisecond))})
		if d.sleep(ctx, wait) != nil {
			return err
		}
		backoff = min(backoff*2, limit)
	}
}

// patchNode merge-patches a node's annotations (and unschedulable), which
// is idempotent, retrying transient errors.
func (d *Drainer) patchNode(ctx context.Context, node string, ann map[string]any, unschedulable *bool) error {
	return d.retry(ctx, func() error { return patchNode(ctx, d.Kube, node, ann, unschedulable) })
}

// readCheckpoint reads a gang's protocol state, retrying transient errors.
func (d *Drainer) readCheckpoint(ctx context.Context, keys checkpoint.Keys, t checkpoint.Target) (checkpoint.State, error) {
	var st checkpoint.State
	err := d.retry(ctx, func() (err error) {
		st, err = checkpoint.Read(ctx, d.Dynamic, keys, t)
		return err
	})
	return st, err
}

// evict evicts a pod through h, which retries the server's refusals by
// itself; evict also retries when no answer came at all (the connection
// failed), and leaves every answer of the server to h.
func (d *Drainer) evict(ctx context.Context, h *eviction.Helper, p *corev1.Pod) error {
	return d.retryIf(ctx, func() (bool, error) {
		r, err := h.Evict(ctx, p)
		return r.Code == 0 && !errors.Is(err, eviction.ErrDeadline), err
	})
}
