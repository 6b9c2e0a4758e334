package localcluster

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var getOpts = metav1.GetOptions{}

// Poll calls cond every interval until it returns true, returns an error, or
// timeout passes. The error on timeout names what was awaited and the last
// error cond returned, if any.
func Poll(ctx context.Context, what string, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-t.C:
		}
	}
}

// Eventually is Poll with a 250ms interval, for tests.
func Eventually(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return Poll(ctx, what, 250*time.Millisecond, timeout, cond)
}
