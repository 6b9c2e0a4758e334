package crdmigrate

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
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
	backoff := r.Initial
	if backoff <= 0 {
		backoff = 250 * time.Millisecond
	}
	maxBackoff := r.Max
	if maxBackoff <= 0 {
		maxBackoff = 30 * time.Second
	}
	sleep := r.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || !Retriable(err) || attempt >= r.attempts() || ctx.Err() != nil {
			return err
		}
		wait := backoff
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			if ra := time.Duration(s) * time.Second; ra > wait {
				wait = min(ra, maxRetryAfter)
			}
		}
		if r.OnRetry != nil {
			r.OnRetry(what, attempt+1, wait, err)
		}
		if serr := sleep(ctx, wait); serr != nil {
			return err
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// Sleep waits for d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retriable reports whether err is worth retrying: throttling, server-side
// timeouts and 5xx (a webhook that cannot be reached answers 500), broken
// or refused connections (an apiserver restarting), and a 404 for the
// resource itself rather than for an object (an apiserver that has not yet
// loaded the CRD).
func Retriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		if code >= http.StatusInternalServerError || code == http.StatusTooManyRequests {
			return true
		}
		if apierrors.IsNotFound(err) && !isObjectNotFound(err, "") {
			return true
		}
		return false
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return true
	}
	return false
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
