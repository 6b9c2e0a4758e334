package transient

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// connRefused is what client-go returns while kube-apiserver is down.
func connRefused() error {
	return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/pods",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestIs(t *testing.T) {
	gr := schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", connRefused(), true},
		{"connection refused, wrapped", fmt.Errorf("reading jobsets ml/train: %w", connRefused()), true},
		{"connection reset", &url.Error{Op: "Get", URL: "https://x", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"EOF", &url.Error{Op: "Get", URL: "https://x", Err: io.EOF}, true},
		{"unexpected EOF, wrapped", fmt.Errorf("listing pods: %w", io.ErrUnexpectedEOF), true},
		{"body cut short", fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", io.ErrUnexpectedEOF), true},
		{"stream cut short", fmt.Errorf("stream error when reading response body, may be caused by closed connection. Please retry. Original error: %w", errors.New("stream error: stream ID 3; INTERNAL_ERROR")), true},
		{"stream reset", &url.Error{Op: "Put", URL: "https://x", Err: errors.New("stream error: stream ID 7; INTERNAL_ERROR; received from peer")}, true},
		{"GOAWAY", &url.Error{Op: "Get", URL: "https://x", Err: errors.New("http2: server sent GOAWAY and closed the connection")}, true},
		{"http2 connection lost", errors.New("http2: client connection lost"), true},
		{"client timeout", &url.Error{Op: "Get", URL: "https://x", Err: timeoutErr{}}, true},
		{"request deadline", fmt.Errorf("listing pods: %w", context.DeadlineExceeded), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"500", apierrors.NewInternalError(errors.New("etcd")), true},
		{"502", apierrors.NewGenericServerResponse(502, "get", gr, "train", "", 0, true), true},
		{"503", apierrors.NewServiceUnavailable("shutting down"), true},
		{"504", apierrors.NewTimeoutError("timed out", 1), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), true},
		{"canceled", fmt.Errorf("waiting: %w", context.Canceled), false},
		{"forbidden", apierrors.NewForbidden(gr, "train", errors.New("no RBAC")), false},
		{"not found", apierrors.NewNotFound(gr, "train"), false},
		{"conflict", apierrors.NewConflict(gr, "train", errors.New("changed")), false},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), false},
		{"invalid", apierrors.NewBadRequest("bad patch"), false},
		{"gone", apierrors.NewResourceExpired("continue token expired"), false},
		{"untrusted certificate", &url.Error{Op: "Get", URL: "https://x", Err: x509.UnknownAuthorityError{}}, false},
		{"plain error", errors.New("gang has no pods"), false},
	} {
		if got := Is(c.err); got != c.want {
			t.Errorf("%s: Is(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
		// Unreachable is the connection failures alone: no answer came.
		answered := c.err != nil && (strings.HasPrefix(c.name, "4") || strings.HasPrefix(c.name, "5") ||
			strings.Contains(c.name, "timeout") || strings.Contains(c.name, "deadline"))
		if got := Unreachable(c.err); got != (c.want && !answered) {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", c.name, c.err, got, c.want && !answered)
		}
	}
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) sleep(_ context.Context, d time.Duration) error { c.now = c.now.Add(d); return nil }

func TestPolicyDo(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		p         Policy
		errs      []error // answers in turn; then success
		wantCalls int
		wantWaits []time.Duration
		wantErr   bool
	}{
		{name: "retries until it succeeds, doubling up to Max",
			p:    Policy{Initial: time.Second, Max: 3 * time.Second},
			errs: []error{connRefused(), connRefused(), connRefused(), connRefused()}, wantCalls: 5,
			wantWaits: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}},
		{name: "a final answer is returned at once",
			p:    Policy{},
			errs: []error{apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))}, wantCalls: 1, wantErr: true},
		{name: "attempts bound the retries",
			p:    Policy{Attempts: 2, Initial: time.Second},
			errs: []error{connRefused(), connRefused(), connRefused(), connRefused()}, wantCalls: 3,
			wantWaits: []time.Duration{time.Second, 2 * time.Second}, wantErr: true},
		{name: "negative attempts: no retries",
			p:    Policy{Attempts: -1},
			errs: []error{connRefused()}, wantCalls: 1, wantErr: true},
		{name: "the budget bounds the time",
			p:    Policy{Budget: 5 * time.Second, Initial: time.Second, Max: 10 * time.Second},
			errs: []error{connRefused(), connRefused(), connRefused(), connRefused()}, wantCalls: 3,
			wantWaits: []time.Duration{time.Second, 2 * time.Second}, wantErr: true},
		{name: "Retry-After is honoured, capped",
			p:    Policy{Initial: time.Second, MaxRetryAfter: 5 * time.Second},
			errs: []error{apierrors.NewTooManyRequests("slow", 3), apierrors.NewTooManyRequests("slow", 60)}, wantCalls: 3,
			wantWaits: []time.Duration{3 * time.Second, 5 * time.Second}},
		{name: "Retryable decides",
			p:    Policy{Retryable: func(err error) bool { return err.Error() == "again" }, Initial: time.Second},
			errs: []error{errors.New("again"), errors.New("stop")}, wantCalls: 2, wantWaits: []time.Duration{time.Second}, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{now: t0}
			var waits []time.Duration
			p := c.p
			p.Sleep, p.Now = clock.sleep, func() time.Time { return clock.now }
			p.OnRetry = func(attempt int, wait time.Duration, err error) {
				if attempt != len(waits)+1 {
					t.Errorf("attempt %d after %d waits", attempt, len(waits))
				}
				waits = append(waits, wait)
			}
			calls := 0
			err := p.Do(context.Background(), func() error {
				calls++
				if calls <= len(c.errs) {
					return c.errs[calls-1]
				}
				return nil
			})
			if calls != c.wantCalls || (err != nil) != c.wantErr || fmt.Sprint(waits) != fmt.Sprint(c.wantWaits) {
				t.Errorf("calls %d err %v waits %v; want calls %d err %v waits %v", calls, err, waits, c.wantCalls, c.wantErr, c.wantWaits)
			}
		})
	}
}

func TestPolicyStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Policy{Initial: time.Hour}.Do(ctx, func() error {
		calls++
		cancel()
		return connRefused()
	})
	if calls != 1 || err == nil {
		t.Errorf("calls %d err %v", calls, err)
	}
}
