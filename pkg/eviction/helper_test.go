package eviction

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "ml", UID: "uid-w-0"}, Spec: corev1.PodSpec{NodeName: "gpu-1"}}
}

// evictionServer answers eviction requests with the given errors in turn
// (nil: accepted) and records what it was sent.
type evictionServer struct {
	mu       sync.Mutex
	answers  []error
	requests []*policyv1.Eviction
}

func (s *evictionServer) client(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests = append(s.requests, a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction))
		if len(s.answers) == 0 {
			return true, nil, nil
		}
		err := s.answers[0]
		if len(s.answers) > 1 {
			s.answers = s.answers[1:]
		}
		return true, nil, err
	})
	return c
}

// runWithClock runs fn while stepping the fake clock a second at a time
// whenever fn is waiting on it, and returns how much fake time passed.
func runWithClock(t *testing.T, fc *clocktesting.FakeClock, fn func()) time.Duration {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-done:
			return fc.Since(t0)
		case <-deadline:
			t.Fatal("eviction did not finish")
		default:
		}
		if fc.HasWaiters() {
			fc.Step(time.Second)
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func TestEvict(t *testing.T) {
	tests := []struct {
		name       string
		answers    []error
		timeout    time.Duration
		want       Reason
		wantErr    bool
		deadline   bool
		attempts   int
		waits      []time.Duration
		wantWaited time.Duration
	}{
		{name: "accepted at once", answers: nil, want: ReasonEvicted, attempts: 1},
		{name: "pod already gone", answers: []error{apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "w-0")},
			want: ReasonPodGone, attempts: 1},
		{name: "429 with Retry-After is honoured, then accepted", answers: []error{staleErr("web"), staleErr("web"), nil},
			want: ReasonEvicted, attempts: 3, waits: []time.Duration{10 * time.Second, 10 * time.Second}, wantWaited: 20 * time.Second},
		{name: "429 budget exhausted backs off doubling", answers: []error{exhaustedErr("web", 2, 2), exhaustedErr("web", 2, 2), exhaustedErr("web", 2, 2), nil},
			want: ReasonEvicted, attempts: 4, waits: []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}, wantWaited: 35 * time.Second},
		{name: "deadline stops retries before a wait that would pass it", answers: []error{staleErr("web")}, timeout: 25 * time.Second,
			want: ReasonPDBStale, wantErr: true, deadline: true, attempts: 3, waits: []time.Duration{10 * time.Second, 10 * time.Second}, wantWaited: 20 * time.Second},
		{name: "500 multiple PDBs is final", answers: []error{multiplePDBErr()}, want: ReasonMultiplePDBs, wantErr: true, attempts: 1},
		{name: "403 negative budget is final", answers: []error{negativeErr("web")}, want: ReasonNegativeBudget, wantErr: true, attempts: 1},
		{name: "403 too many unconfirmed is retried", answers: []error{unconfirmedErr("web"), nil}, want: ReasonEvicted, attempts: 2,
			waits: []time.Duration{5 * time.Second}, wantWaited: 5 * time.Second},
		{name: "403 forbidden is final", answers: []error{rbacErr()}, want: ReasonForbidden, wantErr: true, attempts: 1},
		{name: "sync failed is final", answers: []error{syncFailedErr("crd")}, want: ReasonPDBSyncFailed, wantErr: true, attempts: 1},
		{name: "uid precondition mismatch means the pod is gone",
			answers: []error{apierrors.NewConflict(schema.GroupResource{Resource: "Pod"}, "w-0", errors.New("the UID in the precondition (uid-w-0) does not match the UID in record (new). The object might have been deleted and then recreated"))},
			want:    ReasonPodGone, attempts: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := &evictionServer{answers: tc.answers}
			fc := clocktesting.NewFakeClock(t0)
			h := NewHelper(srv.client())
			h.Clock = fc
			h.Timeout = tc.timeout
			var waits []time.Duration
			var final *Result
			attempts := 0
			h.OnAttempt = func(*corev1.Pod, int) { attempts++ }
			h.OnRefused = func(_ *corev1.Pod, _ Result, d time.Duration) { waits = append(waits, d) }
			h.OnEvicted = func(_ *corev1.Pod, r Result) { final = &r }
			var got Result
			var err error
			waited := runWithClock(t, fc, func() { got, err = h.Evict(context.Background(), testPod()) })
			if got.Reason != tc.want {
				t.Errorf("reason = %s, want %s (err %v)", got.Reason, tc.want, err)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if errors.Is(err, ErrDeadline) != tc.deadline {
				t.Errorf("errors.Is(err, ErrDeadline) = %v, want %v (%v)", !tc.deadline, tc.deadline, err)
			}
			if attempts != tc.attempts {
				t.Errorf("attempts = %d, want %d", attempts, tc.attempts)
			}
			if diff := cmp.Diff(tc.waits, waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if waited != tc.wantWaited {
				t.Errorf("fake time waited = %s, want %s", waited, tc.wantWaited)
			}
			if final == nil || final.Reason != got.Reason {
				t.Errorf("OnEvicted saw %v, want the final result", final)
			}
		})
	}
}

func TestEvictRequest(t *testing.T) {
	srv := &evictionServer{}
	h := NewHelper(srv.client())
	h.DryRun = true
	r := h.EvictOnce(context.Background(), testPod())
	if r.Reason != ReasonEvicted || !r.DryRun {
		t.Fatalf("result = %+v", r)
	}
	if len(srv.requests) != 1 {
		t.Fatalf("requests = %d", len(srv.requests))
	}
	opts := srv.requests[0].DeleteOptions
	if opts.GracePeriodSeconds != nil {
		t.Errorf("grace period sent %d, want the pod's own (unset)", *opts.GracePeriodSeconds)
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "uid-w-0" {
		t.Errorf("preconditions = %+v, want the pod's UID", opts.Preconditions)
	}
	if diff := cmp.Diff([]string{metav1.DryRunAll}, opts.DryRun); diff != "" {
		t.Errorf("dryRun (-want +got):\n%s", diff)
	}

	h.DryRun = false
	h.GracePeriodSeconds = 30
	h.EvictOnce(context.Background(), testPod())
	if g := srv.requests[1].DeleteOptions.GracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("grace period = %v, want 30", g)
	}
}

func TestEvictContextCanceled(t *testing.T) {
	srv := &evictionServer{answers: []error{exhaustedErr("web", 1, 1)}}
	fc := clocktesting.NewFakeClock(t0)
	h := NewHelper(srv.client())
	h.Clock = fc
	ctx, cancel := context.WithCancel(context.Background())
	h.OnRefused = func(*corev1.Pod, Result, time.Duration) { cancel() }
	_, err := h.Evict(ctx, testPod())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestDrainHelperIsConfiguredExplicitly(t *testing.T) {
	h := NewHelper(fake.NewClientset())
	d := h.Drain(context.Background())
	if d.GracePeriodSeconds != -1 || d.EvictErrorRetryDelay != DefaultRetryDelay || d.Out == nil || d.ErrOut == nil ||
		!d.IgnoreAllDaemonSets || d.ChunkSize != DefaultChunkSize {
		t.Errorf("drain helper = %+v", d)
	}
}

func TestPodsForDeletion(t *testing.T) {
	ctrl := true
	rs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ml",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: "gpu-1"}}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: "gpu-1"}}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "static", Namespace: "kube-system",
		Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}, Spec: corev1.PodSpec{NodeName: "gpu-1"}}
	h := NewHelper(fake.NewClientset(rs, bare, mirror))
	list, errs := h.PodsForDeletion(context.Background(), "gpu-1")
	if len(errs) != 1 {
		t.Fatalf("errs = %v, want the pod without a controller", errs)
	}
	h.Force = true
	list, errs = h.PodsForDeletion(context.Background(), "gpu-1")
	if len(errs) != 0 {
		t.Fatalf("errs = %v", errs)
	}
	var names []string
	for _, p := range list.Pods() {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"bare", "web-1"}, names); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}
