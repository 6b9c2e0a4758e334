package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Target names the root object of a gang, where requests and answers live.
type Target struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
}

// String returns "resource.group ns/name".
func (t Target) String() string {
	r := t.Resource.Resource
	if t.Resource.Group != "" {
		r += "." + t.Resource.Group
	}
	return fmt.Sprintf("%s %s/%s", r, t.Namespace, t.Name)
}

func annotationPatch(values map[string]any) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
}

// Patch applies a merge patch of annotation values (nil removes a key) to
// the target.
func Patch(ctx context.Context, c dynamic.Interface, t Target, values map[string]any) error {
	data, err := annotationPatch(values)
	if err != nil {
		return err
	}
	_, err = c.Resource(t.Resource).Namespace(t.Namespace).Patch(ctx, t.Name, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotating %s: %w", t, err)
	}
	return nil
}

// State is what a root object says about the protocol.
type State struct {
	Support    Support
	Request    Request
	HasRequest bool
	Response   Response
	// LastCheckpoint is the latest durable checkpoint reported, or zero.
	LastCheckpoint time.Time
}

// Read fetches the target and parses its protocol state.
func Read(ctx context.Context, c dynamic.Interface, keys Keys, t Target) (State, error) {
	st, _, err := ReadVersion(ctx, c, keys, t)
	return st, err
}

// ReadVersion is Read that also returns the object's resourceVersion, from
// which a watch of the target (Watch) starts.
func ReadVersion(ctx context.Context, c dynamic.Interface, keys Keys, t Target) (State, string, error) {
	u, err := c.Resource(t.Resource).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return State{}, "", fmt.Errorf("reading %s: %w", t, err)
	}
	return keys.StateOf(u.GetLabels(), u.GetAnnotations()), u.GetResourceVersion(), nil
}

// Watch watches the target from resourceVersion rv: a field selector on
// its name, so only its own changes arrive.
func Watch(ctx context.Context, c dynamic.Interface, t Target, rv string) (watch.Interface, error) {
	return c.Resource(t.Resource).Namespace(t.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", t.Name).String(), ResourceVersion: rv})
}

// StateOf parses the protocol state from an object's labels and annotations.
func (k Keys) StateOf(labels, ann map[string]string) State {
	req, ok := k.ParseRequest(ann)
	return State{
		Support:        k.SupportOf(labels, ann),
		Request:        req,
		HasRequest:     ok,
		Response:       k.ParseResponse(ann),
		LastCheckpoint: k.LastCheckpoint(ann),
	}
}

// Requester writes checkpoint-and-yield requests on root objects and mirrors
// them onto the pods it is given, where a downward-API volume exposes them
// to the containers. Mirroring costs one request per pod: callers pass the
// pods only when the gang asked for it (Keys.WantsPodMirror) or has no root
// object.
type Requester struct {
	Client dynamic.Interface
	// Pods, when set, receives the mirrored request annotations.
	Pods kubernetes.Interface
	Keys Keys
}

// Request writes req on the target in one patch, then mirrors it onto pods
// (namespace of the target). Mirroring is best effort: a pod that is gone
// is skipped. Writing the same request twice is harmless: the responder
// acts once per request id.
func (r *Requester) Request(ctx context.Context, t Target, req Request, pods []string) error {
	if err := Patch(ctx, r.Client, t, r.Keys.RequestPatch(req)); err != nil {
		return err
	}
	return r.mirror(ctx, t.Namespace, pods, r.Keys.RequestPatch(req))
}

// Cancel withdraws the request with id on the target and its pods.
func (r *Requester) Cancel(ctx context.Context, t Target, req Request, pods []string) error {
	req.State = Cancelled
	return r.Request(ctx, t, req, pods)
}

// Clear removes the request keys from the target.
func (r *Requester) Clear(ctx context.Context, t Target) error {
	return Patch(ctx, r.Client, t, r.Keys.ClearRequestPatch())
}

// MarkStopped ends the request on the target because the gang was
// stopped (state Stopped): a responder tells its trainer not to resume,
// and a gang readmitted later does not yield again.
func (r *Requester) MarkStopped(ctx context.Context, t Target) error {
	return Patch(ctx, r.Client, t, r.Keys.StoppedPatch())
}

func (r *Requester) mirror(ctx context.Context, ns string, pods []string, values map[string]any) error {
	if r.Pods == nil || len(pods) == 0 {
		return nil
	}
	data, err := annotationPatch(values)
	if err != nil {
		return err
	}
	for _, p := range pods {
		_, err := r.Pods.CoreV1().Pods(ns).Patch(ctx, p, types.MergePatchType, data, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("mirroring the request onto pod %s/%s: %w", ns, p, err)
		}
	}
	return nil
}

// Answer writes a response on the target (for controllers that drive the
// protocol themselves instead of embedding a Responder).
func Answer(ctx context.Context, c dynamic.Interface, keys Keys, t Target, resp Response) error {
	return Patch(ctx, c, t, keys.ResponsePatch(resp))
}

// Result is what a successful checkpoint reports.
type Result struct {
	// Step is the training step saved.
	Step string
	// URI is where the checkpoint lives.
	URI string
}

// CheckpointFunc writes a durable checkpoint and pauses stepping. It must
// return when ctx is cancelled. When the request was withdrawn,
// context.Cause(ctx) says how: ErrGangStopped (the gang is being stopped:
// stay paused, do not resume) or ErrRequestCancelled (resume training);
// the error returned then, if it is not ctx's own, is recorded as the
// detail of the withdrawn answer (what the trainer had done). Otherwise an
// error that is (or wraps) a *DeclinedError is answered declined, any
// other error failed.
type CheckpointFunc func(ctx context.Context, req Request) (Result, error)

// Causes of a CheckpointFunc's cancelled context when its request ends
// before the answer.
var (
	// ErrRequestCancelled: the request was cancelled, removed or replaced
	// by another; the gang resumes stepping.
	ErrRequestCancelled = errors.New("checkpoint request cancelled")
	// ErrGangStopped: the request ended because the gang was stopped; it
	// must not resume stepping.
	ErrGangStopped = errors.New("gang stopped")
)

// DeclinedError is returned by a CheckpointFunc that refuses to yield (for
// example because the trainer said so); the Responder answers declined with
// its message.
type DeclinedError struct {
	Message string
}

func (e *DeclinedError) Error() string { return withMessage("declined", e.Message) }

// Responder is the gang side of the protocol, for a training controller or a
// rank-0 agent to embed. It watches one root object by polling, and for each
// new request id acknowledges, runs Checkpoint while sending heartbeats,
// and answers ready-to-stop (or failed, or declined). It never stops the
// gang itself: the drain does that after ready-to-stop.
type Responder struct {
	Client dynamic.Interface
	Target Target
	Keys   Keys
	Clock  clock.Clock
	// Checkpoint does the work; required.
	Checkpoint CheckpointFunc
	// Decide, when set, may decline a request (accept false, with a reason).
	Decide func(Request) (accept bool, message string)
	// PollInterval is how often the object is read (default 1s).
	PollInterval time.Duration
	// HeartbeatInterval is how often heartbeat-at is refreshed while
	// checkpointing (default 5s).
	HeartbeatInterval time.Duration
	// OnError, when set, sees errors the responder recovers from.
	OnError func(error)
	// Alive, when set, gates the heartbeat while Checkpoint runs:
	// heartbeat-at is refreshed only while it returns true. A checkpointer
	// that proves it is alive some other way (a trainer touching a file)
	// then lets the heartbeat lapse when it goes silent, and the
	// requester's heartbeat timeout decides instead of its deadline.
	Alive func(Request) bool
	// Observe, when set, sees every state read between requests (not while
	// Checkpoint runs), before the responder acts on it.
	Observe func(context.Context, State)

	mu      sync.Mutex
	handled string
}

func (r *Responder) clock() clock.Clock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

func (r *Responder) report(err error) {
	if err != nil && r.OnError != nil {
		r.OnError(err)
	}
}

// Run answers requests until ctx is cancelled; it returns ctx's error.
func (r *Responder) Run(ctx context.Context) error {
	poll := r.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	for {
		st, err := Read(ctx, r.Client, r.Keys, r.Target)
		if err == nil && r.Observe != nil {
			r.Observe(ctx, st)
		}
		if err != nil {
			r.report(err)
		} else if st.Request.Active() && st.Request.ID != r.lastHandled() {
			if st.Response.ObservedRequestID == st.Request.ID && isFinal(st.Response.Status) {
				// Answered before a restart of this responder.
				r.setHandled(st.Request.ID)
			} else {
				r.handle(ctx, st.Request)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.clock().After(poll):
		}
	}
}

func isFinal(s Status) bool {
	return s == StatusReadyToStop || s == StatusFailed || s == StatusDeclined
}

func (r *Responder) lastHandled() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled
}

func (r *Responder) setHandled(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handled = id
}

func (r *Responder) answer(ctx context.Context, resp Response) error {
	resp.HeartbeatAt = r.clock().Now()
	return Answer(ctx, r.Client, r.Keys, r.Target, resp)
}

// handle runs one request to its answer. Errors writing answers are
// reported and the request is retried on the next poll.
func (r *Responder) handle(ctx context.Context, req Request) {
	base := Response{ObservedRequestID: req.ID}
	ack := base
	ack.Status = StatusAcknowledged
	if err := r.answer(ctx, ack); err != nil {
		r.report(err)
		return
	}
	if r.Decide != nil {
		if ok, msg := r.Decide(req); !ok {
			d := base
			d.Status, d.Message = StatusDeclined, msg
			if err := r.answer(ctx, d); err != nil {
				r.report(err)
				return
			}
			r.setHandled(req.ID)
			return
		}
	}
	prog := base
	prog.Status = StatusInProgress
	if err := r.answer(ctx, prog); err != nil {
		r.report(err)
		return
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Checkpoint(cctx, req)
		done <- outcome{res, err}
	}()
	hb := r.HeartbeatInterval
	if hb <= 0 {
		hb = 5 * time.Second
	}
	for {
		select {
		case <-ctx.Done():
			// The responder is stopping: the request stays open for the
			// next one, and Run returns only once Checkpoint has.
			cancel(nil)
			<-done
			return
		case <-r.clock().After(hb):
			st, err := Read(ctx, r.Client, r.Keys, r.Target)
			if err == nil && (!st.Request.Active() || st.Request.ID != req.ID) {
				cause := ErrRequestCancelled
				if st.Request.ID == req.ID && st.Request.State == Stopped {
					cause = ErrGangStopped
				}
				cancel(cause)
				o := <-done
				r.withdrawn(ctx, base, cause, o.res, o.err)
				r.setHandled(req.ID)
				return
			}
			if r.Alive == nil || r.Alive(req) {
				r.report(r.answer(ctx, prog))
			}
		case o := <-done:
			if ctx.Err() != nil {
				// Stopped while Checkpoint returned: no answer from a
				// stopping responder (its error is the stop, not the
				// trainer's); the next responder answers.
				return
			}
			final := base
			var declined *DeclinedError
			if errors.As(o.err, &declined) {
				final.Status, final.Message = StatusDeclined, declined.Message
			} else if o.err != nil {
				final.Status, final.Message = StatusFailed, o.err.Error()
			} else {
				now := r.clock().Now()
				final.Status, final.Step, final.URI, final.CompletedAt = StatusReadyToStop, o.res.Step, o.res.URI, now
			}
			values := r.Keys.ResponsePatch(withHeartbeat(final, r.clock().Now()))
			if o.err == nil {
				values[r.Keys.LastCheckpointAt()] = FormatTime(final.CompletedAt)
			}
			if err := Patch(ctx, r.Client, r.Target, values); err != nil {
				r.report(err)
				return
			}
			r.setHandled(req.ID)
			return
		}
	}
}

// withdrawn records, as the final answer, that the request ended before
// the responder answered it, and how: the gang stopped, or the request
// withdrawn; with what the checkpointer reported on its way out (a
// checkpoint it finished just then is named, and published as the last
// one).
func (r *Responder) withdrawn(ctx context.Context, base Response, cause error, res Result, err error) {
	msg := "the request was withdrawn before the gang answered; the trainer was told to resume"
	if errors.Is(cause, ErrGangStopped) {
		msg = "the gang was stopped before it answered; the trainer was told not to resume"
	}
	values := map[string]any{}
	switch {
	case err == nil:
		msg += fmt.Sprintf("; it had just finished a checkpoint (step %s, %s)", orDash(res.Step), orDash(res.URI))
		values[r.Keys.LastCheckpointAt()] = FormatTime(r.clock().Now())
	case !errors.Is(err, context.Canceled) && !errors.Is(err, cause):
		msg += "; " + err.Error()
	}
	c := base
	c.Status, c.Message = StatusWithdrawn, msg
	for k, v := range r.Keys.ResponsePatch(withHeartbeat(c, r.clock().Now())) {
		values[k] = v
	}
	r.report(Patch(ctx, r.Client, r.Target, values))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func withHeartbeat(r Response, t time.Time) Response {
	r.HeartbeatAt = t
	return r
}
