package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// Agent answers checkpoint-and-yield requests on a gang's root object for
// a trainer that speaks the file contract in Dir. It embeds
// checkpoint.Responder, which owns the protocol on the object; the agent
// only turns a request into RequestFile and the trainer's answer file into
// the Responder's result.
//
// The answer on the root object is the agent's only state: a restarted
// agent finds a final answer to the current request and does nothing, or
// an unfinished one and waits again for the trainer's file (without
// writing the request again when RequestFile already holds it).
type Agent struct {
	Client dynamic.Interface
	Target checkpoint.Target
	Keys   checkpoint.Keys
	// Dir is the directory shared with the trainer.
	Dir Dir
	// Signal, when not 0, is sent to every process named Process on a new
	// request and on a withdrawal (the pod needs shareProcessNamespace).
	Signal  syscall.Signal
	Process string
	// Proc is the proc file system (default /proc).
	Proc string
	// ProgressTimeout, when positive, requires the trainer to touch
	// ProgressFile at least this often while it works on a request; when
	// it stops, the agent stops the heartbeat and the drain's heartbeat
	// timeout decides. Zero keeps the heartbeat while the agent runs.
	ProgressTimeout time.Duration
	// PollInterval is how often the root object is read (default 2s).
	PollInterval time.Duration
	// FilePollInterval is how often Dir is read for an answer (default
	// 250ms).
	FilePollInterval time.Duration
	// HeartbeatInterval is how often the heartbeat is refreshed (default
	// 5s).
	HeartbeatInterval time.Duration
	// Logf prints one line (default: nothing).
	Logf func(format string, args ...any)
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu          sync.Mutex
	current     string
	requestedAt time.Time // modification time of RequestFile
	silent      bool
	logged      map[string]bool
}

func (a *Agent) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// logOnce prints a line the first time it is seen.
func (a *Agent) logOnce(line string) {
	a.mu.Lock()
	if a.logged == nil {
		a.logged = map[string]bool{}
	}
	seen := a.logged[line]
	a.logged[line] = true
	a.mu.Unlock()
	if !seen {
		a.logf("%s", line)
	}
}

func (a *Agent) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// PermissionError says the agent may not do what it needs on its root
// object.
type PermissionError struct {
	Verb   string
	Target checkpoint.Target
	Err    error
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("forbidden: the agent may not %s %s (bind the Role in deploy/rbac/checkpoint-agent.yaml to its service account): %v",
		e.Verb, e.Target, apiMessage(e.Err))
}

func (e *PermissionError) Unwrap() error { return e.Err }

func apiMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Message
	}
	return err.Error()
}

// Check proves the agent can read and annotate its root object: a get and
// an empty merge patch (authorized like any patch, changes nothing).
func (a *Agent) Check(ctx context.Context) error {
	if _, err := checkpoint.Read(ctx, a.Client, a.Keys, a.Target); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return &PermissionError{Verb: "get", Target: a.Target, Err: err}
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("root object %s not found: check --root or the pod's labels", a.Target)
		}
		return err
	}
	if err := checkpoint.Patch(ctx, a.Client, a.Target, map[string]any{}); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return &PermissionError{Verb: "patch", Target: a.Target, Err: err}
		}
		return err
	}
	return nil
}

// Run answers requests until ctx ends (it then returns nil) or the agent
// loses its permissions (a *PermissionError).
func (a *Agent) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fatalMu sync.Mutex
	var fatal error
	r := &checkpoint.Responder{
		Client: a.Client, Target: a.Target, Keys: a.Keys,
		Checkpoint: func(cctx context.Context, req checkpoint.Request) (checkpoint.Result, error) {
			return a.checkpoint(runCtx, cctx, req)
		},
		PollInterval:      durationOr(a.PollInterval, 2*time.Second),
		HeartbeatInterval: durationOr(a.HeartbeatInterval, 5*time.Second),
		Alive:             a.alive,
		Observe:           a.observe,
		OnError: func(err error) {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				fatalMu.Lock()
				if fatal == nil {
					fatal = &PermissionError{Verb: "get or patch", Target: a.Target, Err: err}
				}
				fatalMu.Unlock()
				cancel()
				return
			}
			if ctx.Err() == nil {
				a.logf("warning: %v (retrying)", err)
			}
		},
	}
	a.logf("answering checkpoint-and-yield requests on %s through %s", a.Target, a.Dir)
	_ = r.Run(runCtx)
	fatalMu.Lock()
	defer fatalMu.Unlock()
	return fatal
}

func (a *Agent) signal(why string) {
	if a.Signal == 0 || a.Process == "" {
		return
	}
	n, err := SignalProcesses(a.procDir(), a.Process, a.Signal)
	if err != nil {
		a.logf("warning: %s: %v", why, err)
	}
	if n > 0 {
		a.logf("%s: sent %s to %d process(es) named %s", why, a.Signal, n, a.Process)
	}
}

func (a *Agent) procDir() string {
	if a.Proc != "" {
		return a.Proc
	}
	return "/proc"
}

func (a *Agent) setCurrent(id string, written time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.current, a.requestedAt, a.silent = id, written, false
}

// checkpoint hands one request to the trainer and waits for its answer
// file. runCtx is the agent's own context: when it ends the agent is
// stopping, and the request stays in place for the next agent; when only
// ctx ends the request was withdrawn.
func (a *Agent) checkpoint(runCtx, ctx context.Context, req checkpoint.Request) (checkpoint.Result, error) {
	seen := a.now()
	cur, written, ok := a.Dir.ReadRequest()
	if ok && cur.ID == req.ID {
		a.logf("request %s is already in %s (agent restarted); waiting for the trainer's answer", req.ID, RequestFile)
	} else {
		if err := a.Dir.WriteRequest(req); err != nil {
			return checkpoint.Result{}, fmt.Errorf("writing %s: %w", RequestFile, err)
		}
		_, written, _ = a.Dir.ReadRequest()
		a.logf("request %s written to %s (deadline %s, reason %s)", req.ID, RequestFile, checkpoint.FormatTime(req.Deadline), quote(req.Reason))
		a.signal("request " + req.ID)
	}
	a.setCurrent(req.ID, written)
	tick := time.NewTicker(durationOr(a.FilePollInterval, 250*time.Millisecond))
	defer tick.Stop()
	for {
		ans, problems := a.Dir.ReadAnswer(req.ID, written)
		for _, p := range problems {
			a.logOnce(p)
		}
		took := a.now().Sub(seen).Round(time.Millisecond)
		switch ans.Kind {
		case AnswerReady:
			a.logf("trainer ready for request %s at step %s (%s); answering ready-to-stop, %s after the agent saw the request", req.ID, orNone(string(ans.Step)), orNone(ans.URI), took)
			return checkpoint.Result{Step: string(ans.Step), URI: ans.URI}, nil
		case AnswerFailed:
			a.logf("trainer failed request %s: %s; answering failed", req.ID, orNone(ans.Message))
			return checkpoint.Result{}, errors.New(orDefault(ans.Message, "the trainer wrote "+FailedFile))
		case AnswerDeclined:
			a.logf("trainer declined request %s: %s; answering declined", req.ID, orNone(ans.Message))
			return checkpoint.Result{}, &checkpoint.DeclinedError{Message: orDefault(ans.Message, "the trainer wrote "+DeclinedFile)}
		}
		select {
		case <-ctx.Done():
			if runCtx.Err() != nil {
				return checkpoint.Result{}, ctx.Err()
			}
			told := "it was told to resume (" + CancelledFile + ")"
			if errors.Is(context.Cause(ctx), checkpoint.ErrGangStopped) {
				a.stop(req.ID)
				told = "it was told the gang is stopping (" + StoppedFile + ")"
			} else {
				a.withdraw(req.ID)
			}
			return checkpoint.Result{}, fmt.Errorf("%s; %s", a.trainerSoFar(written), told)
		case <-tick.C:
		}
	}
}

// trainerSoFar says, for the record of a request withdrawn before an
// answer, what the trainer had shown since the request was written.
func (a *Agent) trainerSoFar(written time.Time) string {
	p := a.Dir.ProgressAt()
	if p.Before(written) {
		return fmt.Sprintf("the trainer never answered: no %s, %s or %s, and no touch of %s after the request", ReadyFile, FailedFile, DeclinedFile, ProgressFile)
	}
	return fmt.Sprintf("the trainer had not answered; it last touched %s %s before", ProgressFile, a.now().Sub(p).Round(time.Second))
}

// stop tells the trainer that request id ended in a stop of the gang,
// once.
func (a *Agent) stop(id string) {
	if a.Dir.ReadStopped() == id {
		return
	}
	if err := a.Dir.Stop(id, "the gang is being stopped: do not resume; exit on SIGTERM"); err != nil {
		a.logf("warning: telling the trainer request %s ended in a stop: %v", id, err)
		return
	}
	a.logf("request %s ended: the gang is being stopped; wrote %s (%s stays, so the trainer keeps pausing)", id, StoppedFile, RequestFile)
	a.signal("stopped request " + id)
}

func (a *Agent) withdraw(id string) {
	if err := a.Dir.Withdraw(id); err != nil {
		a.logf("warning: withdrawing request %s: %v", id, err)
		return
	}
	a.logf("request %s withdrawn: removed %s, wrote %s", id, RequestFile, CancelledFile)
	a.signal("withdrawn request " + id)
}

// alive says whether the trainer still proves it works on req: it touched
// ProgressFile (or the request was written) within ProgressTimeout.
func (a *Agent) alive(req checkpoint.Request) bool {
	if a.ProgressTimeout <= 0 {
		return true
	}
	a.mu.Lock()
	last := a.requestedAt
	a.mu.Unlock()
	if p := a.Dir.ProgressAt(); p.After(last) {
		last = p
	}
	quiet := a.now().Sub(last)
	ok := quiet <= a.ProgressTimeout
	a.mu.Lock()
	changed := a.silent == ok
	a.silent = !ok
	a.mu.Unlock()
	if changed && !ok {
		a.logf("trainer silent for %s (no touch of %s within --progress-timeout %s): heartbeat withheld", quiet.Round(time.Second), ProgressFile, a.ProgressTimeout)
	} else if changed {
		a.logf("trainer alive again: heartbeat resumed")
	}
	return ok
}

// observe keeps Dir in step with the object between requests: a request
// no longer active there either ended in a stop of the gang (the trainer
// is told not to resume) or was withdrawn (it is told to resume), and a
// newer last-checkpoint.json is published as last-checkpoint-at.
func (a *Agent) observe(ctx context.Context, st checkpoint.State) {
	if cur, _, ok := a.Dir.ReadRequest(); ok && !(st.Request.Active() && st.Request.ID == cur.ID) {
		if endedInStop(st, cur.ID) {
			a.stop(cur.ID)
		} else {
			a.withdraw(cur.ID)
		}
	}
	lc, ok := a.Dir.ReadLastCheckpoint()
	if !ok {
		return
	}
	at := lc.At.UTC().Truncate(time.Second)
	if !at.After(st.LastCheckpoint) {
		return
	}
	err := checkpoint.Patch(ctx, a.Client, a.Target, map[string]any{a.Keys.LastCheckpointAt(): checkpoint.FormatTime(at)})
	if err != nil {
		a.logOnce(fmt.Sprintf("warning: publishing %s: %v", LastCheckpointFile, err))
		return
	}
	a.logf("published last checkpoint %s (step %s) as %s", checkpoint.FormatTime(at), orNone(string(lc.Step)), a.Keys.LastCheckpointAt())
}

// endedInStop reports whether request id ended because the gang was
// stopped: the object says so (state stopped), or, as a requester that
// predates that state does after a stop, the request keys were removed
// after the gang answered ready-to-stop (the requester stops a gang that
// answered so; it cancels only one that did not).
func endedInStop(st checkpoint.State, id string) bool {
	if st.HasRequest {
		return st.Request.ID == id && st.Request.State == checkpoint.Stopped
	}
	return st.Response.ObservedRequestID == id && st.Response.Status == checkpoint.StatusReadyToStop
}

func orNone(s string) string { return orDefault(s, "-") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
