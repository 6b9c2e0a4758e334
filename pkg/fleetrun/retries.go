package fleetrun

import (
	"context"
	"errors"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// StoreRetries counts what an attempt of a step tried again against the
// store instead of failing: Conflicts are compare-and-swap writes another
// writer won (S3 412 PreconditionFailed, a GCS generation or Azure ETag
// mismatch), after which the runner read again and decided again;
// Transient are failures retried with backoff (a 5xx, 429, 408, S3's 409
// ConditionalRequestConflict, a timeout or a dropped connection: Transient).
// None of them reaches a person; the counts say how contended or flaky the
// store was.
type StoreRetries struct {
	Conflicts int64 `json:"conflicts,omitempty"`
	Transient int64 `json:"transient,omitempty"`
}

// Zero reports whether nothing was retried.
func (r StoreRetries) Zero() bool { return r.Conflicts == 0 && r.Transient == 0 }

// retryCounter is what countRetries puts in a context.
type retryCounter struct{ conflicts, transient atomic.Int64 }

type retryCounterKey struct{}

// countRetries returns a context whose store retries are counted.
func countRetries(ctx context.Context) (context.Context, *retryCounter) {
	c := &retryCounter{}
	return context.WithValue(ctx, retryCounterKey{}, c), c
}

func (c *retryCounter) counts() StoreRetries {
	if c == nil {
		return StoreRetries{}
	}
	return StoreRetries{Conflicts: c.conflicts.Load(), Transient: c.transient.Load()}
}

// noteRetry counts one retry caused by err in ctx's counter, if any.
func noteRetry(ctx context.Context, err error) {
	c, _ := ctx.Value(retryCounterKey{}).(*retryCounter)
	switch {
	case c == nil:
	case errors.Is(err, ErrConflict):
		c.conflicts.Add(1)
	default:
		c.transient.Add(1)
	}
}

// retryStore runs f under backoff while it fails with an error retryable
// accepts and ctx is not done (client-go util/retry.OnError), counting
// each try after the first in ctx's counter by the error that caused it.
func retryStore(ctx context.Context, backoff wait.Backoff, retryable func(error) bool, f func() error) error {
	var last error
	return retry.OnError(backoff, func(err error) bool { return ctx.Err() == nil && retryable(err) }, func() error {
		if last != nil {
			noteRetry(ctx, last)
		}
		last = f()
		return last
	})
}

// retriesIn is what ctx's counter counted so far (zero without one).
func retriesIn(ctx context.Context) StoreRetries {
	c, _ := ctx.Value(retryCounterKey{}).(*retryCounter)
	return c.counts()
}
