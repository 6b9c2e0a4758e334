package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestEvaluate(t *testing.T) {
	req := Request{State: Requested, ID: "r1", RequestedAt: t0, Deadline: t0.Add(30 * time.Minute)}
	to := Timeouts{Ack: time.Minute, Heartbeat: 2 * time.Minute}
	cases := []struct {
		name string
		now  time.Time
		resp Response
		want Verdict
	}{
		{"no answer yet", t0.Add(10 * time.Second), Response{}, Verdict{Phase: PhaseWaiting, Reason: "waiting for acknowledgement"}},
		{"ack timeout", t0.Add(61 * time.Second), Response{}, Verdict{Phase: PhaseTimedOut, Timeout: TimeoutAck, Reason: "not acknowledged within 1m0s"}},
		{"answer to an old request is ignored", t0.Add(61 * time.Second), Response{ObservedRequestID: "r0", Status: StatusReadyToStop}, Verdict{Phase: PhaseTimedOut, Timeout: TimeoutAck, Reason: "not acknowledged within 1m0s"}},
		{"in progress with heartbeat", t0.Add(5 * time.Minute), Response{ObservedRequestID: "r1", Status: StatusInProgress, HeartbeatAt: t0.Add(4 * time.Minute)}, Verdict{Phase: PhaseWaiting, Reason: "in-progress"}},
		{"heartbeat lost", t0.Add(5 * time.Minute), Response{ObservedRequestID: "r1", Status: StatusInProgress, HeartbeatAt: t0.Add(time.Minute)}, Verdict{Phase: PhaseTimedOut, Timeout: TimeoutHeartbeat, Reason: "no heartbeat for 4m0s (status in-progress)"}},
		{"deadline", t0.Add(31 * time.Minute), Response{ObservedRequestID: "r1", Status: StatusInProgress, HeartbeatAt: t0.Add(31 * time.Minute)}, Verdict{Phase: PhaseTimedOut, Timeout: TimeoutDeadline, Reason: "not ready to stop before the deadline 2026-01-02T03:34:05Z (status in-progress)"}},
		{"ready", t0.Add(40 * time.Minute), Response{ObservedRequestID: "r1", Status: StatusReadyToStop, Step: "1200"}, Verdict{Phase: PhaseReady, Reason: "ready to stop at step 1200"}},
		{"failed", t0.Add(time.Minute), Response{ObservedRequestID: "r1", Status: StatusFailed, Message: "bucket full"}, Verdict{Phase: PhaseFailed, Reason: "checkpoint failed: bucket full"}},
		{"declined", t0.Add(time.Minute), Response{ObservedRequestID: "r1", Status: StatusDeclined}, Verdict{Phase: PhaseDeclined, Reason: "declined"}},
		{"withdrawn by someone else", t0.Add(time.Minute), Response{ObservedRequestID: "r1", Status: StatusWithdrawn, Message: "cancelled"}, Verdict{Phase: PhaseFailed, Reason: "the responder saw the request withdrawn: cancelled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Evaluate(tc.now, req, tc.resp, to)); d != "" {
				t.Errorf("-want +got\n%s", d)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	k, err := NewKeys("", "platform.example.com/checkpoint-and-yield")
	if err != nil {
		t.Fatal(err)
	}
	if k.Prefix != "platform.example.com/" || k.Request != "platform.example.com/checkpoint-and-yield" || k.Status() != "platform.example.com/checkpoint-status" {
		t.Errorf("keys %+v", k)
	}
	if _, err := NewKeys("Not A Domain", ""); err == nil {
		t.Error("want an error for a bad prefix")
	}
	if key, err := ParseAnnotationFlag("platform.example.com/checkpoint-and-yield=requested"); err != nil || key != "platform.example.com/checkpoint-and-yield" {
		t.Errorf("ParseAnnotationFlag = %q, %v", key, err)
	}
	if _, err := ParseAnnotationFlag("x=yes"); err == nil {
		t.Error("want an error for a bad value")
	}
	d := DefaultKeys()
	req := Request{State: Requested, ID: "r1", RequestedAt: t0, Deadline: t0.Add(time.Hour), Reason: "upgrade", Requester: "alice"}
	ann := map[string]string{}
	for k, v := range d.RequestPatch(req) {
		if s, ok := v.(string); ok {
			ann[k] = s
		}
	}
	got, ok := d.ParseRequest(ann)
	if !ok {
		t.Fatal("request not parsed")
	}
	if diff := cmp.Diff(req, got); diff != "" {
		t.Errorf("round trip -want +got\n%s", diff)
	}
	if s := d.SupportOf(map[string]string{d.Protocol(): "none"}, nil); s != SupportNo {
		t.Errorf("support = %s", s)
	}
}

var jobsets = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

func newDynamic() *dynamicfake.FakeDynamicClient {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("jobset.x-k8s.io/v1alpha2")
	u.SetKind("JobSet")
	u.SetNamespace("ml")
	u.SetName("train")
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{jobsets: "JobSetList"}, u)
}

func TestResponderRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cp     CheckpointFunc
		decide func(Request) (bool, string)
		want   Phase
	}{
		{"ready", func(context.Context, Request) (Result, error) { return Result{Step: "42", URI: "s3://b/42"}, nil }, nil, PhaseReady},
		{"failed", func(context.Context, Request) (Result, error) { return Result{}, errors.New("disk full") }, nil, PhaseFailed},
		{"declined", nil, func(Request) (bool, string) { return false, "last epoch" }, PhaseDeclined},
		{"declined by the checkpoint", func(context.Context, Request) (Result, error) {
			return Result{}, fmt.Errorf("trainer: %w", &DeclinedError{Message: "last epoch"})
		}, nil, PhaseDeclined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDynamic()
			target := Target{Resource: jobsets, Namespace: "ml", Name: "train"}
			keys := DefaultKeys()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rq := &Requester{Client: c, Keys: keys}
			req := Request{State: Requested, ID: "run-1", RequestedAt: time.Now(), Deadline: time.Now().Add(time.Minute)}
			if err := rq.Request(ctx, target, req, nil); err != nil {
				t.Fatal(err)
			}
			rs := &Responder{Client: c, Target: target, Keys: keys, Checkpoint: tc.cp, Decide: tc.decide, PollInterval: 10 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond}
			rctx, rcancel := context.WithCancel(ctx)
			defer rcancel()
			go func() { _ = rs.Run(rctx) }()
			for {
				st, err := Read(ctx, c, keys, target)
				if err != nil {
					t.Fatal(err)
				}
				v := Evaluate(time.Now(), st.Request, st.Response, Timeouts{Ack: time.Minute})
				if v.Done() {
					if v.Phase != tc.want {
						t.Fatalf("phase %s, want %s (%s)", v.Phase, tc.want, v.Reason)
					}
					if tc.want == PhaseReady && (st.Response.URI != "s3://b/42" || st.LastCheckpoint.IsZero()) {
						t.Errorf("response %+v last %v", st.Response, st.LastCheckpoint)
					}
					return
				}
				if ctx.Err() != nil {
					t.Fatal("no answer")
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestResponderAliveGatesHeartbeat: while Alive is false the heartbeat is
// not refreshed, so the requester's heartbeat timeout can fire.
func TestResponderAliveGatesHeartbeat(t *testing.T) {
	c := newDynamic()
	target := Target{Resource: jobsets, Namespace: "ml", Name: "train"}
	keys := DefaultKeys()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fc := clocktesting.NewFakeClock(t0)
	if err := (&Requester{Client: c, Keys: keys}).Request(ctx, target, Request{State: Requested, ID: "r1", RequestedAt: t0}, nil); err != nil {
		t.Fatal(err)
	}
	var alive atomic.Bool
	rs := &Responder{Client: c, Target: target, Keys: keys, Clock: fc, PollInterval: time.Second, HeartbeatInterval: time.Second,
		Checkpoint: func(ctx context.Context, _ Request) (Result, error) { <-ctx.Done(); return Result{}, ctx.Err() },
		Alive:      func(Request) bool { return alive.Load() }}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rs.Run(rctx) }()
	defer func() { rcancel(); <-done }()
	heartbeat := func() time.Time {
		st, err := Read(ctx, c, keys, target)
		if err != nil {
			t.Fatal(err)
		}
		return st.Response.HeartbeatAt
	}
	for {
		st, _ := Read(ctx, c, keys, target)
		if st.Response.Status == StatusInProgress && fc.HasWaiters() {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("never in progress")
		}
		time.Sleep(time.Millisecond)
	}
	step := func() {
		for !fc.HasWaiters() && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		fc.Step(time.Second)
		time.Sleep(20 * time.Millisecond) // let the tick's read and patch finish
	}
	for i := 0; i < 3; i++ {
		step()
	}
	if hb := heartbeat(); !hb.Equal(t0) {
		t.Errorf("heartbeat %v while not alive, want %v", hb, t0)
	}
	alive.Store(true)
	step()
	step()
	if hb := heartbeat(); !hb.After(t0) {
		t.Errorf("heartbeat %v after the checkpointer is alive again, want later than %v", hb, t0)
	}
}

// TestResponderStopWaitsForCheckpoint: a responder that stops while the
// checkpoint runs returns from Run only once Checkpoint has returned, and
// writes no answer then: the request stays open for the next responder,
// never answered "failed" with the stop's own error.
func TestResponderStopWaitsForCheckpoint(t *testing.T) {
	c := newDynamic()
	target := Target{Resource: jobsets, Namespace: "ml", Name: "train"}
	keys := DefaultKeys()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := (&Requester{Client: c, Keys: keys}).Request(ctx, target, Request{State: Requested, ID: "r1", RequestedAt: time.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var finished atomic.Bool
	rs := &Responder{Client: c, Target: target, Keys: keys, PollInterval: 10 * time.Millisecond, HeartbeatInterval: time.Hour,
		Checkpoint: func(ctx context.Context, _ Request) (Result, error) {
			close(started)
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // a trainer's last words
			finished.Store(true)
			return Result{}, ctx.Err()
		}}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rs.Run(rctx) }()
	<-started
	rcancel()
	<-done
	if !finished.Load() {
		t.Error("Run returned while Checkpoint was still running")
	}
	st, err := Read(ctx, c, keys, target)
	if err != nil {
		t.Fatal(err)
	}
	if isFinal(st.Response.Status) {
		t.Errorf("a stopping responder answered %s (%s)", st.Response.Status, st.Response.Message)
	}
}

// TestResponderWithdrawn: a request that ends before the answer is
// recorded as withdrawn, saying whether the gang was stopped or the
// request cancelled, with the checkpointer's own account; never as
// declined (nobody declined), and the checkpointer learns which through
// its context's cause.
func TestResponderWithdrawn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		end       func(ctx context.Context, rq *Requester, target Target, req Request) error
		cause     error
		wantInMsg []string
	}{
		{"cancelled", func(ctx context.Context, rq *Requester, target Target, req Request) error {
			return rq.Cancel(ctx, target, req, nil)
		}, ErrRequestCancelled, []string{"withdrawn before the gang answered", "told to resume", "the trainer never answered"}},
		{"keys removed", func(ctx context.Context, rq *Requester, target Target, _ Request) error {
			return rq.Clear(ctx, target)
		}, ErrRequestCancelled, []string{"withdrawn before the gang answered"}},
		{"gang stopped", func(ctx context.Context, rq *Requester, target Target, _ Request) error {
			return rq.MarkStopped(ctx, target)
		}, ErrGangStopped, []string{"stopped before it answered", "told not to resume", "the trainer never answered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDynamic()
			target := Target{Resource: jobsets, Namespace: "ml", Name: "train"}
			keys := DefaultKeys()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rq := &Requester{Client: c, Keys: keys}
			req := Request{State: Requested, ID: "r1", RequestedAt: time.Now()}
			if err := rq.Request(ctx, target, req, nil); err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			var cause atomic.Value
			rs := &Responder{Client: c, Target: target, Keys: keys, PollInterval: 5 * time.Millisecond, HeartbeatInterval: 5 * time.Millisecond,
				Checkpoint: func(ctx context.Context, _ Request) (Result, error) {
					close(started)
					<-ctx.Done()
					cause.Store(context.Cause(ctx))
					return Result{}, errors.New("the trainer never answered")
				}}
			rctx, rcancel := context.WithCancel(ctx)
			defer rcancel()
			go func() { _ = rs.Run(rctx) }()
			<-started
			if err := tc.end(ctx, rq, target, req); err != nil {
				t.Fatal(err)
			}
			var st State
			for {
				var err error
				if st, err = Read(ctx, c, keys, target); err != nil {
					t.Fatal(err)
				}
				if isFinal(st.Response.Status) || st.Response.Status == StatusWithdrawn || ctx.Err() != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if st.Response.Status != StatusWithdrawn || st.Response.ObservedRequestID != "r1" {
				t.Fatalf("answer %+v, want withdrawn for r1", st.Response)
			}
			for _, w := range tc.wantInMsg {
				if !strings.Contains(st.Response.Message, w) {
					t.Errorf("message %q lacks %q", st.Response.Message, w)
				}
			}
			if got, _ := cause.Load().(error); !errors.Is(got, tc.cause) {
				t.Errorf("the checkpointer's context cause %v, want %v", got, tc.cause)
			}
		})
	}
}
