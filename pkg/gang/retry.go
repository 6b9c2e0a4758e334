package gang

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

// maxRetryBackoff caps the wait between two tries of a call that failed
// with a transient error (unless the poll interval is longer).
const maxRetryBackoff = 5 * time.Second

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
	may := false
	return transient.Policy{
		Initial:   backoff,
		Max:       max(maxRetryBackoff, backoff),
		Retryable: func(err error) bool { return may && transient.Is(err) },
		Sleep:     d.sleep,
		OnRetry: func(_ int, wait time.Duration, err error) {
			d.emit(Event{Type: EventWarning, Message: fmt.Sprintf("%v; retrying in %s", err, wait.Round(time.Millisecond))})
		},
	}.Do(ctx, func() error {
		var err error
		may, err = fn()
		return err
	})
}

// patchNode merge-patches a node's annotations (and unschedulable), which
// is idempotent, retrying transient errors.
func (d *Drainer) patchNode(ctx context.Context, node string, ann map[string]any, unschedulable *bool) error {
	return d.retry(ctx, func() error { return patchNode(ctx, d.Kube, node, ann, unschedulable) })
}

// readCheckpoint reads a gang's protocol state, retrying transient errors.
func (d *Drainer) readCheckpoint(ctx context.Context, keys checkpoint.Keys, t checkpoint.Target) (checkpoint.State, error) {
	st, _, err := d.readCheckpointVersion(ctx, keys, t)
	return st, err
}

// readCheckpointVersion is readCheckpoint with the resourceVersion read.
func (d *Drainer) readCheckpointVersion(ctx context.Context, keys checkpoint.Keys, t checkpoint.Target) (checkpoint.State, string, error) {
	var st checkpoint.State
	var rv string
	err := d.retry(ctx, func() (err error) {
		st, rv, err = checkpoint.ReadVersion(ctx, d.Dynamic, keys, t)
		return err
	})
	return st, rv, err
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
