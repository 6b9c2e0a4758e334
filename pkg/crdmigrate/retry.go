package crdmigrate

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

// Retry retries transient API errors a bounded number of times with
// exponential backoff, waiting at least as long as a Retry-After the server
// sent. With the defaults the waits add up to about a minute, long enough
// to ride out an apiserver restart.
type Retry struct {
	// Attempts is the number of retries after the first try (default 8;
	// negative means none).
	Attempts int
	// Initial is the first backoff (default 250ms); it doubles up to Max
	// (default 30s).
	Initial, Max time.Duration
	// Sleep waits; nil means a timer that ctx can cut short.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry is told about each retry before its wait.
	OnRetry func(what string, attempt int, wait time.Duration, err error)
}

// maxRetryAfter caps a server's Retry-After.
const maxRetryAfter = time.Minute

func (r Retry) attempts() int {
	switch {
	case r.Attempts < 0:
		return 0
	case r.Attempts == 0:
		return 8
	}
	return r.Attempts
}

// Do calls fn until it succeeds, fails with an error that is not
// transient, or the retries are used up; it returns fn's last error.
func (r Retry) Do(ctx context.Context, what string, fn func() error) error {
	maxBackoff := r.Max
	if maxBackoff <= 0 {
		maxBackoff = 30 * time.Second
	}
	p := transient.Policy{Attempts: r.attempts(), Initial: r.Initial, Max: maxBackoff, MaxRetryAfter: maxRetryAfter,
		Retryable: Retriable, Sleep: r.Sleep}
	if r.attempts() == 0 {
		p.Attempts = -1
	}
	if r.OnRetry != nil {
		p.OnRetry = func(attempt int, wait time.Duration, err error) { r.OnRetry(what, attempt, wait, err) }
	}
	return p.Do(ctx, fn)
}

// Sleep waits for d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error { return transient.Sleep(ctx, d) }

// Retriable reports whether err is worth retrying: what transient.Is says
// (throttling, 5xx, a webhook that cannot be reached answers 500, broken or
// refused connections of an apiserver restarting), and a 404 for the
// resource itself rather than for an object (an apiserver that has not yet
// loaded the CRD).
func Retriable(err error) bool {
	if transient.Is(err) {
		return true
	}
	return apierrors.IsNotFound(err) && !isObjectNotFound(err, "")
}

// isObjectNotFound reports whether err is a 404 for a named object (name ""
// accepts any name), as opposed to a 404 for a path the apiserver does not
// serve (yet).
func isObjectNotFound(err error, name string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsNotFound(err) {
		return false
	}
	d := status.Status().Details
	if d == nil || d.Name == "" {
		return false
	}
	return name == "" || d.Name == name
}
