package deprecations

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

// Retry bounds the retries of one page of a paged list. client-go retries a
// GET on a reset connection and on a Retry-After answer, but not on a
// refused connection or a body cut short: an apiserver that restarts in
// the middle of a scan would otherwise end the source. A page is retried
// with exponential backoff while no answer comes (transient.Unreachable)
// and the time since the page's first failure is within Budget; every page
// that is answered starts a new budget. An answer (throttling and 5xx
// included) and a --request-timeout that ran out are not retried here: a
// read-only scan of a struggling apiserver ends in bounded time.
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

// do calls fn until it succeeds, fails with an error that is not
// transient, the budget is spent or ctx ends; it returns fn's last error.
func (r Retry) do(ctx context.Context, what string, fn func() error) error {
	p := transient.Policy{Budget: r.Budget, Initial: r.Initial, Max: r.Max, MaxRetryAfter: maxRetryAfter, Sleep: r.Sleep, Now: r.Now,
		Retryable: transient.Unreachable}
	switch {
	case r.Budget < 0:
		p.Attempts = -1
	case r.Budget == 0:
		p.Budget = DefaultRetryBudget
	}
	if r.OnRetry != nil {
		p.OnRetry = func(attempt int, wait time.Duration, err error) { r.OnRetry(what, attempt, wait, err) }
	}
	return p.Do(ctx, fn)
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
