package deprecations

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// helmListServer serves Helm release Secrets two per page, with a fault
// injected into chosen requests (numbered from 1 over Secret lists).
type helmListServer struct {
	mu      sync.Mutex
	secrets []corev1.Secret
	faults  map[int]func(w http.ResponseWriter)
	// tokens records the continue token of every Secret list that reached
	// the handler.
	tokens []string
}

func (s *helmListServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/configmaps":
		_ = json.NewEncoder(w).Encode(corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}})
		return
	case "/api/v1/secrets":
	default:
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cont := r.URL.Query().Get("continue")
	s.tokens = append(s.tokens, cont)
	if f := s.faults[len(s.tokens)]; f != nil {
		f(w)
		return
	}
	start := 0
	if cont != "" {
		fmt.Sscanf(cont, "p%d", &start)
	}
	end := min(start+2, len(s.secrets))
	l := corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"}, Items: s.secrets[start:end]}
	if end < len(s.secrets) {
		l.Continue = fmt.Sprintf("p%d", end)
	}
	_ = json.NewEncoder(w).Encode(l)
}

func statusFault(code int, reason metav1.StatusReason) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: "injected " + string(reason)})
	}
}

// cutShort answers a list with the start of a body and closes the
// connection, as a stopping apiserver does.
func cutShort(w http.ResponseWriter) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"kind\":\"SecretList\",\"items\":[")
	_ = buf.Flush()
	_ = conn.Close()
}

// TestHelmReaderRetriesAcrossRestart lists Helm release Secrets from an
// HTTP server that stops in the middle of a page (the body cut short),
// stays away (connection refused), comes back on the same address and
// lets a continue token expire (410). The reader resumes from the same
// continue token after the restart, lists again from the first page after
// the 410 without reporting a record twice, and finds every release
// exactly once.
func TestHelmReaderRetriesAcrossRestart(t *testing.T) {
	const n = 5
	hs := &helmListServer{faults: map[int]func(http.ResponseWriter){
		2: cutShort,                                                 // first pass, page 2
		4: statusFault(http.StatusGone, metav1.StatusReasonExpired), // first pass, page 3
	}}
	for i := range n {
		manifest := fmt.Sprintf("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: job-%d\n", i)
		hs.secrets = append(hs.secrets, corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sh.helm.release.v1.r%d.v1", i), Namespace: "apps",
				Labels: map[string]string{"name": fmt.Sprintf("r%d", i), "owner": "helm", "status": "deployed", "version": "1"}},
			Type: helmSecretType, Data: map[string][]byte{"release": releaseText(t, manifest, true)}})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	serve := func(l net.Listener) *httptest.Server {
		srv := httptest.NewUnstartedServer(hs)
		_ = srv.Listener.Close()
		srv.Listener = l
		srv.Start()
		return srv
	}
	srv := serve(l)
	defer func() { srv.Close() }()

	kc, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	var retries []string
	sleeps := 0
	h := &HelmReader{Kube: kc, Scanner: &ManifestScanner{}, PageSize: 2, Retry: Retry{
		Sleep: func(ctx context.Context, d time.Duration) error {
			sleeps++
			switch sleeps {
			case 1: // after the cut-short page: the apiserver is gone
				srv.Close()
			case 2: // after the refused connection: it is back
				l, err := net.Listen("tcp", addr)
				if err != nil {
					return fmt.Errorf("listening again on %s: %w", addr, err)
				}
				srv = serve(l)
			}
			return nil
		},
		OnRetry: func(what string, attempt int, wait time.Duration, err error) {
			retries = append(retries, fmt.Sprintf("%s #%d: %v", what, attempt, err))
		},
	}}
	res, err := h.Read(context.Background())
	if err != nil {
		t.Fatalf("read across a restart: %v\nretries: %q", err, retries)
	}
	var got []string
	for _, f := range res.Findings {
		got = append(got, f.Name)
	}
	slices.Sort(got)
	if want := []string{"job-0", "job-1", "job-2", "job-3", "job-4"}; !slices.Equal(got, want) || res.Records != n || res.Releases != n {
		t.Errorf("findings %q (records %d, releases %d), want each of %q once", got, res.Records, res.Releases, want)
	}
	// Requests that reached the server: page 1, page 2 (cut short), page 2
	// again after the refused connection (the same token), page 3 (410),
	// pages 1 to 3 again; then the second pass.
	wantTokens := []string{"", "p2", "p2", "p4", "", "p2", "p4", "", "p2", "p4"}
	if !slices.Equal(hs.tokens, wantTokens) {
		t.Errorf("continue tokens requested %q, want %q", hs.tokens, wantTokens)
	}
	joined := strings.Join(retries, "\n")
	for _, want := range []string{"EOF", "connection refused", "continue token expired"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no retry for %q in:\n%s", want, joined)
		}
	}
}

// TestListRetryGivesUp: a server that keeps refusing is retried with
// growing waits until the budget is spent. A server that answers is not
// retried by the scan at all: Forbidden and 404 keep their meaning, and
// throttling, 5xx and timeouts are left to client-go's own retries
// (Retry-After) and the caller's --request-timeout, so that a read-only
// scan of a struggling apiserver ends in bounded time.
func TestListRetryGivesUp(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &netSyscallError{syscall.ECONNREFUSED}}
	cs := fake.NewClientset()
	calls := 0
	cs.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		return true, nil, refused
	})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	h := &HelmReader{Kube: cs, Scanner: &ManifestScanner{}, Retry: Retry{
		Budget: time.Minute,
		Now:    func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error {
			waits = append(waits, d)
			now = now.Add(d)
			return nil
		},
	}}
	_, err := h.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "listing Helm release Secrets") {
		t.Fatalf("want the last connection refused error, got %v", err)
	}
	var total time.Duration
	for _, w := range waits {
		total += w
	}
	if calls != len(waits)+1 || total > time.Minute || total < 30*time.Second || waits[0] != 250*time.Millisecond || waits[len(waits)-1] != 10*time.Second {
		t.Errorf("%d calls, waits %v (total %s): want backoff from 250ms to 10s within the 1m budget", calls, waits, total)
	}

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", fmt.Errorf("User \"dev\" cannot list resource \"secrets\" in API group \"\" at the cluster scope"))},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "")},
		{"service unavailable", apierrors.NewServiceUnavailable("injected")},
		{"throttled", apierrors.NewTooManyRequests("injected", 1)},
		{"timed out", fmt.Errorf("listing: %w", context.DeadlineExceeded)},
	} {
		cs := fake.NewClientset()
		calls := 0
		cs.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			calls++
			return true, nil, tc.err
		})
		h := &HelmReader{Kube: cs, Scanner: &ManifestScanner{}, Retry: Retry{
			Sleep: func(context.Context, time.Duration) error { t.Errorf("%s: retried", tc.name); return nil },
		}}
		_, err := h.Read(context.Background())
		if calls != 1 || err == nil || !strings.Contains(err.Error(), tc.err.Error()) {
			t.Errorf("%s: %d calls, error %v", tc.name, calls, err)
		}
	}
}

// netSyscallError wraps an errno the way os.SyscallError does.
type netSyscallError struct{ errno syscall.Errno }

func (e *netSyscallError) Error() string { return "connect: " + e.errno.Error() }
func (e *netSyscallError) Unwrap() error { return e.errno }
