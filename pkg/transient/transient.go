// Package transient tells the API server's "not now" from its "no", and
// retries calls through the former: throttling (429), server errors and
// timeouts (5xx), and connections refused, reset or cut short, as while
// kube-apiserver restarts. Every other answer (Forbidden, NotFound,
// Conflict, Invalid...) keeps its meaning and is returned at once.
package transient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Is reports whether err says the API server could not answer for now:
// Unreachable, throttling (429), a server error or timeout (5xx), or a
// request that timed out on the client. client-go already retries a GET on
// a reset connection and any request answered with Retry-After, but not a
// refused connection or a response body cut short.
func Is(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := int(status.Status().Code)
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
	}
	if Unreachable(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}

// Unreachable reports whether err says no answer came at all because the
// connection failed: refused (no listener, as while kube-apiserver
// restarts), reset, closed or cut short in the middle of a response. A
// server that answers, however badly (429, 5xx), and a request that ran
// out of time are not unreachable: a read-only command leaves those to
// client-go's own retries and the caller's --request-timeout.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// client-go's own words for a response cut short (an apiserver
	// stopping while it sent a page), with or without an EOF inside, and
	// an HTTP/2 stream the server reset before or while answering.
	if msg := err.Error(); strings.Contains(msg, "when reading response body") || strings.Contains(msg, "stream error: stream ID") {
		return true
	}
	// A dial that failed (no listener, no route). Not any net.Error: every
	// *url.Error is one, an untrusted certificate included, and that never
	// clears by waiting.
	var op *net.OpError
	return errors.As(err, &op) && !(op.Timeout())
}

// Policy is how a call is retried: exponential backoff from Initial,
// doubling up to Max, never shorter than a Retry-After the server sent
// (capped at MaxRetryAfter), until the call succeeds, fails for good, the
// attempts or the budget are used up, or ctx ends.
type Policy struct {
	// Attempts bounds the retries after the first try (0: no bound;
	// negative: no retries).
	Attempts int
	// Budget bounds the time from the first failure to the end of the
	// last wait (0: no bound).
	Budget time.Duration
	// Initial is the first wait (default 250ms); it doubles up to Max
	// (default 10s).
	Initial, Max time.Duration
	// MaxRetryAfter caps a server's Retry-After (default Max).
	MaxRetryAfter time.Duration
	// Retryable says which errors to retry (nil: Is).
	Retryable func(error) bool
	// Sleep waits; nil means a timer that ctx cuts short.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// OnRetry is told about each retry before its wait: the attempt (1 for
	// the first retry), the wait and the error.
	OnRetry func(attempt int, wait time.Duration, err error)
}

// Do calls fn until it succeeds or the policy gives up, and returns fn's
// last error.
func (p Policy) Do(ctx context.Context, fn func() error) error {
	backoff := p.Initial
	if backoff <= 0 {
		backoff = 250 * time.Millisecond
	}
	maxBackoff := p.Max
	if maxBackoff <= 0 {
		maxBackoff = 10 * time.Second
	}
	maxBackoff = max(maxBackoff, backoff)
	capRA := p.MaxRetryAfter
	if capRA <= 0 {
		capRA = maxBackoff
	}
	retryable := p.Retryable
	if retryable == nil {
		retryable = Is
	}
	now := p.Now
	if now == nil {
		now = time.Now
	}
	var first time.Time
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || p.Attempts < 0 || ctx.Err() != nil || !retryable(err) {
			return err
		}
		if p.Attempts > 0 && attempt > p.Attempts {
			return err
		}
		if first.IsZero() {
			first = now()
		}
		wait := RetryAfter(err, backoff, capRA)
		if p.Budget > 0 && now().Add(wait).Sub(first) > p.Budget {
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(attempt, wait, err)
		}
		if p.sleep(ctx, wait) != nil {
			return err
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// RetryAfter is the wait before the next try: backoff, or the server's
// Retry-After when it asks for longer, capped at limit.
func RetryAfter(err error, backoff, limit time.Duration) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		if ra := time.Duration(s) * time.Second; ra > backoff {
			return max(backoff, min(ra, limit))
		}
	}
	return backoff
}

func (p Policy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
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
