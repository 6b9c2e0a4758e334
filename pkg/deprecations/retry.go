package deprecations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Retry bounds the retries of one page of a paged list. client-go retries a
// GET on a reset connection and on a Retry-After answer, but not on a
// refused connection: an apiserver that restarts in the middle of a scan
// would otherwise end the source. A page is retried with exponential
// backoff while its failures are transient and the time since the page's
// first failure is within Budget; every page that is answered starts a new
// budget.
type Retry struct {
	// Budget bounds how long one page is retried (default 2 minutes, about
	// four times what a restarting apiserver needs); negative means no
	// retries.
	Budget time.Duration
	// Initial is the first backoff (default 250ms); it doubles up to Max
	// (default 10s).
	Initial, Max time.Duration
	// Sleep waits; nil means a timer that ctx can cut short.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnRetry is told about each retry before its wait: what is listed, the
	// attempt number (1 for the first retry), the wait and the error.
	OnRetry func(what string, attempt int, wait time.Duration, err error)
}

// DefaultRetryBudget is how long one page is retried by default.
const DefaultRetryBudget = 2 * time.Minute

// maxRetryAfter caps a server's Retry-After.
const maxRetryAfter = 30 * time.Second

// maxListRestarts bounds how often one list starts again from the first
// page after its continue token expired.
const maxListRestarts = 3

func (r Retry) budget() time.Duration {
	if r.Budget == 0 {
		return DefaultRetryBudget
	}
	return r.Budget
}

func (r Retry) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r Retry) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// do calls fn until it succeeds, fails with an error that is not
// transient, the budget is spent or ctx ends; it returns fn's last error.
func (r Retry) do(ctx context.Context, what string, fn func() error) error {
	backoff := r.Initial
	if backoff <= 0 {
		backoff = 250 * time.Millisecond
	}
	maxBackoff := r.Max
	if maxBackoff <= 0 {
		maxBackoff = 10 * time.Second
	}
	var first time.Time
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || r.budget() < 0 || !Transient(err) || ctx.Err() != nil {
			return err
		}
		if first.IsZero() {
			first = r.now()
		}
		wait := backoff
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			if ra := time.Duration(s) * time.Second; ra > wait {
				wait = min(ra, maxRetryAfter)
			}
		}
		if r.now().Add(wait).Sub(first) > r.budget() {
			return err
		}
		if r.OnRetry != nil {
			r.OnRetry(what, attempt, wait, err)
		}
		if r.sleep(ctx, wait) != nil {
			return err
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// Transient reports whether a list error is worth retrying: throttling,
// server-side timeouts and 5xx, and refused, reset, cut-short or timed-out
// connections (an apiserver restarting, or a --request-timeout that ran
// out). Forbidden, Unauthorized, NotFound and other answers are not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := int(status.Status().Code)
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// client-go's own words for a response cut short (an apiserver
	// stopping while it sent a page), with or without an EOF inside.
	if strings.Contains(err.Error(), "when reading response body") {
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr)
}

// expired reports a continue token the server no longer accepts.
func expired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// listPages lists page by page, retrying each page's transient errors with
// r and resuming from the same continue token. When the token has expired
// (410) the list starts again from the first page, and items already
// handled (by key) are skipped, so each item is handed to each once. list
// returns a page's items and its continue token.
func listPages[T any](ctx context.Context, r Retry, what string, limit int64,
	list func(ctx context.Context, opts metav1.ListOptions) ([]T, string, error),
	key func(*T) string, each func(*T)) error {
	var seen map[string]bool
	restarts := 0
	cont := ""
	for {
		var (
			items []T
			next  string
		)
		err := r.do(ctx, what, func() error {
			var err error
			items, next, err = list(ctx, metav1.ListOptions{Limit: limit, Continue: cont})
			return err
		})
		if err != nil && cont != "" && expired(err) && restarts < maxListRestarts && ctx.Err() == nil {
			restarts++
			if r.OnRetry != nil {
				r.OnRetry(what, restarts, 0, fmt.Errorf("continue token expired, listing again from the first page: %w", err))
			}
			cont = ""
			continue
		}
		if err != nil {
			return err
		}
		for i := range items {
			k := key(&items[i])
			if seen[k] {
				continue
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[k] = true
			each(&items[i])
		}
		if cont = next; cont == "" {
			return nil
		}
	}
}
