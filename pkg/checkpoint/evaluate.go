package checkpoint

import (
	"fmt"
	"time"
)

// Timeouts bound how long a requester waits. The checkpoint deadline itself
// travels in the request (Request.Deadline).
type Timeouts struct {
	// Ack is how long the responder has to acknowledge a request; 0 waits
	// for ever.
	Ack time.Duration
	// Heartbeat is the longest silence allowed between heartbeats once the
	// request is acknowledged; 0 disables the check.
	Heartbeat time.Duration
}

// Phase is where a request stands from the requester's point of view.
type Phase string

// Phases of a request.
const (
	// PhaseWaiting means keep waiting.
	PhaseWaiting Phase = "Waiting"
	// PhaseReady means the gang reported ready-to-stop.
	PhaseReady Phase = "Ready"
	// PhaseFailed means the gang reported that its checkpoint failed.
	PhaseFailed Phase = "Failed"
	// PhaseDeclined means the gang declined to yield.
	PhaseDeclined Phase = "Declined"
	// PhaseTimedOut means one of the timeouts passed.
	PhaseTimedOut Phase = "TimedOut"
)

// TimeoutKind names which timeout passed.
type TimeoutKind string

// Timeout kinds.
const (
	// TimeoutAck: no acknowledgement within Timeouts.Ack.
	TimeoutAck TimeoutKind = "acknowledgement"
	// TimeoutDeadline: no ready-to-stop before the request's deadline.
	TimeoutDeadline TimeoutKind = "deadline"
	// TimeoutHeartbeat: the responder went silent for longer than
	// Timeouts.Heartbeat.
	TimeoutHeartbeat TimeoutKind = "heartbeat"
)

// Verdict is the outcome of Evaluate.
type Verdict struct {
	Phase   Phase       `json:"phase"`
	Timeout TimeoutKind `json:"timeout,omitempty"`
	// Reason is one line for humans.
	Reason string `json:"reason"`
}

// Done reports whether the requester should stop waiting.
func (v Verdict) Done() bool { return v.Phase != PhaseWaiting }

// Evaluate is the pure decision of the requester: given the request it
// wrote, the responder's answer and the time now, should it keep waiting,
// stop the gang, or give up? Answers to other request ids are ignored.
func Evaluate(now time.Time, req Request, resp Response, t Timeouts) Verdict {
	if resp.ObservedRequestID != req.ID || resp.Status == StatusNone {
		if !req.Deadline.IsZero() && now.After(req.Deadline) {
			return Verdict{Phase: PhaseTimedOut, Timeout: TimeoutDeadline, Reason: fmt.Sprintf("no answer before the deadline %s", FormatTime(req.Deadline))}
		}
		if t.Ack > 0 && !req.RequestedAt.IsZero() && now.Sub(req.RequestedAt) > t.Ack {
			return Verdict{Phase: PhaseTimedOut, Timeout: TimeoutAck, Reason: fmt.Sprintf("not acknowledged within %s", t.Ack)}
		}
		return Verdict{Phase: PhaseWaiting, Reason: "waiting for acknowledgement"}
	}
	switch resp.Status {
	case StatusReadyToStop:
		r := "ready to stop"
		if resp.Step != "" {
			r += " at step " + resp.Step
		}
		return Verdict{Phase: PhaseReady, Reason: r}
	case StatusFailed:
		return Verdict{Phase: PhaseFailed, Reason: withMessage("checkpoint failed", resp.Message)}
	case StatusDeclined:
		return Verdict{Phase: PhaseDeclined, Reason: withMessage("declined", resp.Message)}
	case StatusWithdrawn:
		// The responder saw this request withdrawn, while the requester
		// still waits on it: someone else ended it. It will not be answered.
		return Verdict{Phase: PhaseFailed, Reason: withMessage("the responder saw the request withdrawn", resp.Message)}
	}
	if !req.Deadline.IsZero() && now.After(req.Deadline) {
		return Verdict{Phase: PhaseTimedOut, Timeout: TimeoutDeadline, Reason: fmt.Sprintf("not ready to stop before the deadline %s (status %s)", FormatTime(req.Deadline), resp.Status)}
	}
	if t.Heartbeat > 0 {
		last := resp.HeartbeatAt
		if last.IsZero() || last.Before(req.RequestedAt) {
			last = req.RequestedAt
		}
		if !last.IsZero() && now.Sub(last) > t.Heartbeat {
			return Verdict{Phase: PhaseTimedOut, Timeout: TimeoutHeartbeat, Reason: fmt.Sprintf("no heartbeat for %s (status %s)", now.Sub(last).Round(time.Second), resp.Status)}
		}
	}
	return Verdict{Phase: PhaseWaiting, Reason: string(resp.Status)}
}

func withMessage(s, msg string) string {
	if msg == "" {
		return s
	}
	return s + ": " + msg
}
