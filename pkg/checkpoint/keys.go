package checkpoint

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultPrefix is the annotation prefix the protocol uses unless told
// otherwise.
const DefaultPrefix = "gpufleet.dev/"

// Values of the request annotation.
const (
	// Requested asks the gang to checkpoint and yield.
	Requested = "requested"
	// Cancelled withdraws a request before the gang was stopped; the gang
	// resumes stepping.
	Cancelled = "cancelled"
	// Stopped ends a request because the gang was stopped (after its
	// answer, or without one under --on-timeout=stop): the gang must not
	// resume stepping, its pods are ending. Like Cancelled it is not an
	// active request, so a gang readmitted later does not yield to it; a
	// responder that knows only requested and cancelled treats it as a
	// withdrawal, as it treated the removed request keys before.
	Stopped = "stopped"
)

// Status is the responder's answer.
type Status string

// Statuses a responder reports, in the order they normally appear.
const (
	// StatusNone means no answer for the current request.
	StatusNone Status = ""
	// StatusAcknowledged means the responder saw the request.
	StatusAcknowledged Status = "acknowledged"
	// StatusInProgress means the checkpoint is being written.
	StatusInProgress Status = "in-progress"
	// StatusReadyToStop means the checkpoint is durable and stepping has
	// paused: the gang may be stopped now.
	StatusReadyToStop Status = "ready-to-stop"
	// StatusFailed means the checkpoint could not be written.
	StatusFailed Status = "failed"
	// StatusDeclined means the responder refuses to yield (for example in
	// the last minutes of a run).
	StatusDeclined Status = "declined"
	// StatusWithdrawn means the request was withdrawn (cancelled, or ended
	// by a stop of the gang) before the responder had a final answer; the
	// message says which and what the trainer had done. It is written for
	// the record: the requester has stopped waiting by then.
	StatusWithdrawn Status = "withdrawn"
)

// Support says whether a gang speaks the protocol.
type Support string

// Support values, read from the protocol label on the root object.
const (
	// SupportUnknown means the gang carries no protocol label: a request is
	// sent and the acknowledgement timeout decides.
	SupportUnknown Support = "unknown"
	// SupportYes means the gang is labelled as speaking the protocol.
	SupportYes Support = "yes"
	// SupportNo means the gang is labelled as not speaking the protocol: no
	// request is sent and the drain applies its --on-timeout policy at once.
	SupportNo Support = "no"
)

// Keys names the protocol's annotations. The zero value is not usable; use
// NewKeys or DefaultKeys.
type Keys struct {
	// Prefix is prepended to every key but Request, e.g. "gpufleet.dev/".
	Prefix string
	// Request is the full key of the request annotation, by default
	// Prefix+"checkpoint-and-yield".
	Request string
}

// DefaultKeys returns the keys under DefaultPrefix.
func DefaultKeys() Keys { return mustKeys(NewKeys(DefaultPrefix, "")) }

func mustKeys(k Keys, _ error) Keys { return k }

// NewKeys returns the keys under prefix (a DNS subdomain followed by "/",
// the slash optional). requestKey, when not empty, replaces the request
// annotation's key, as in the form "platform.example.com/checkpoint-and-yield";
// when prefix is empty it is taken from requestKey's domain.
func NewKeys(prefix, requestKey string) (Keys, error) {
	if prefix == "" && requestKey != "" {
		if i := strings.Index(requestKey, "/"); i > 0 {
			prefix = requestKey[:i+1]
		}
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	domain := strings.TrimSuffix(prefix, "/")
	if errs := validation.IsDNS1123Subdomain(domain); len(errs) > 0 {
		return Keys{}, fmt.Errorf("annotation prefix %q: %s", prefix, strings.Join(errs, "; "))
	}
	k := Keys{Prefix: prefix, Request: prefix + "checkpoint-and-yield"}
	if requestKey != "" {
		if errs := validation.IsQualifiedName(requestKey); len(errs) > 0 {
			return Keys{}, fmt.Errorf("annotation key %q: %s", requestKey, strings.Join(errs, "; "))
		}
		k.Request = requestKey
	}
	return k, nil
}

// ParseAnnotationFlag reads the --annotation flag: KEY or KEY=requested.
func ParseAnnotationFlag(s string) (string, error) {
	key, val, hasVal := strings.Cut(s, "=")
	if hasVal && val != Requested {
		return "", fmt.Errorf("--annotation %q: the value must be %q", s, Requested)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 || !strings.Contains(key, "/") {
		return "", fmt.Errorf("--annotation %q: want a prefixed key such as platform.example.com/checkpoint-and-yield", s)
	}
	return key, nil
}

// Key names. Each is Prefix + the name.
const (
	nameRequestID      = "checkpoint-request-id"
	nameRequestedAt    = "checkpoint-requested-at"
	nameDeadline       = "checkpoint-deadline"
	nameReason         = "checkpoint-reason"
	nameRequester      = "checkpoint-requester"
	nameObservedID     = "checkpoint-observed-request-id"
	nameStatus         = "checkpoint-status"
	nameHeartbeatAt    = "checkpoint-heartbeat-at"
	nameStep           = "checkpoint-step"
	nameURI            = "checkpoint-uri"
	nameCompletedAt    = "checkpoint-completed-at"
	nameMessage        = "checkpoint-message"
	nameLastCheckpoint = "last-checkpoint-at"
	nameProtocol       = "checkpoint-and-yield-protocol"
	nameMirrorToPods   = "checkpoint-mirror-to-pods"
)

// RequestID is the key of the request id (the idempotency key).
func (k Keys) RequestID() string { return k.Prefix + nameRequestID }

// RequestedAt is the key of the request time.
func (k Keys) RequestedAt() string { return k.Prefix + nameRequestedAt }

// Deadline is the key of the checkpoint deadline.
func (k Keys) Deadline() string { return k.Prefix + nameDeadline }

// Reason is the key of the human-readable reason for the request.
func (k Keys) Reason() string { return k.Prefix + nameReason }

// Requester is the key naming who asked.
func (k Keys) Requester() string { return k.Prefix + nameRequester }

// ObservedRequestID is the key of the request id the responder answers.
func (k Keys) ObservedRequestID() string { return k.Prefix + nameObservedID }

// Status is the key of the responder's status.
func (k Keys) Status() string { return k.Prefix + nameStatus }

// HeartbeatAt is the key of the responder's last heartbeat.
func (k Keys) HeartbeatAt() string { return k.Prefix + nameHeartbeatAt }

// Step is the key of the training step the checkpoint holds.
func (k Keys) Step() string { return k.Prefix + nameStep }

// URI is the key of where the checkpoint was written.
func (k Keys) URI() string { return k.Prefix + nameURI }

// CompletedAt is the key of when the checkpoint became durable.
func (k Keys) CompletedAt() string { return k.Prefix + nameCompletedAt }

// Message is the key of the responder's free-text message.
func (k Keys) Message() string { return k.Prefix + nameMessage }

// LastCheckpointAt is the key of the time of the gang's latest durable
// checkpoint, which a responder may publish at any time (not only when
// asked); plans use it to estimate lost work.
func (k Keys) LastCheckpointAt() string { return k.Prefix + nameLastCheckpoint }

// Protocol is the label (or annotation) that says whether a gang speaks the
// protocol: "v1" or "true" for yes, "none" or "false" for no.
func (k Keys) Protocol() string { return k.Prefix + nameProtocol }

// MirrorToPods is the label (or annotation) by which a gang asks for its
// requests on every one of its pods as well, for code inside the containers
// that reads them through a downward-API volume: "true" asks.
func (k Keys) MirrorToPods() string { return k.Prefix + nameMirrorToPods }

// WantsPodMirror reads the MirrorToPods label (or, failing that,
// annotation) of a root object.
func (k Keys) WantsPodMirror(labels, annotations map[string]string) bool {
	v, ok := labels[k.MirrorToPods()]
	if !ok {
		v = annotations[k.MirrorToPods()]
	}
	return strings.EqualFold(v, "true")
}

// RequestKeys lists the keys the requester owns.
func (k Keys) RequestKeys() []string {
	return []string{k.Request, k.RequestID(), k.RequestedAt(), k.Deadline(), k.Reason(), k.Requester()}
}

// ResponseKeys lists the keys the responder owns.
func (k Keys) ResponseKeys() []string {
	return []string{k.ObservedRequestID(), k.Status(), k.HeartbeatAt(), k.Step(), k.URI(), k.CompletedAt(), k.Message()}
}

// Request is a checkpoint-and-yield request as written on a root object.
type Request struct {
	// State is Requested or Cancelled.
	State string `json:"state"`
	// ID is the idempotency key: a responder acts once per ID.
	ID string `json:"id"`
	// RequestedAt is when the request was first written.
	RequestedAt time.Time `json:"requestedAt"`
	// Deadline is when the requester stops waiting for ready-to-stop.
	Deadline time.Time `json:"deadline,omitzero"`
	// Reason says why, for humans.
	Reason string `json:"reason,omitempty"`
	// Requester names who asked (user and tool).
	Requester string `json:"requester,omitempty"`
}

// Active reports whether the request asks for a checkpoint now.
func (r Request) Active() bool { return r.State == Requested && r.ID != "" }

// StoppedPatch returns the annotation value (for a merge patch) that ends
// the request on the object because the gang was stopped; the other
// request keys stay, as history.
func (k Keys) StoppedPatch() map[string]any {
	return map[string]any{k.Request: Stopped}
}

// Response is a responder's answer as written on a root object.
type Response struct {
	// ObservedRequestID is the request the answer belongs to.
	ObservedRequestID string `json:"observedRequestID,omitempty"`
	// Status is the responder's state for that request.
	Status Status `json:"status,omitempty"`
	// HeartbeatAt is refreshed while the responder works.
	HeartbeatAt time.Time `json:"heartbeatAt,omitzero"`
	// Step is the training step the checkpoint holds.
	Step string `json:"step,omitempty"`
	// URI is where the checkpoint was written.
	URI string `json:"uri,omitempty"`
	// CompletedAt is when the checkpoint became durable.
	CompletedAt time.Time `json:"completedAt,omitzero"`
	// Message is free text, mostly for failed and declined.
	Message string `json:"message,omitempty"`
}

// FormatTime renders a protocol timestamp (RFC 3339, UTC, seconds).
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// ParseRequest reads a request from annotations; ok is false when there is
// none.
func (k Keys) ParseRequest(ann map[string]string) (Request, bool) {
	state, ok := ann[k.Request]
	if !ok {
		return Request{}, false
	}
	return Request{
		State:       state,
		ID:          ann[k.RequestID()],
		RequestedAt: parseTime(ann[k.RequestedAt()]),
		Deadline:    parseTime(ann[k.Deadline()]),
		Reason:      ann[k.Reason()],
		Requester:   ann[k.Requester()],
	}, true
}

// ParseResponse reads a response from annotations (zero when there is none).
func (k Keys) ParseResponse(ann map[string]string) Response {
	return Response{
		ObservedRequestID: ann[k.ObservedRequestID()],
		Status:            Status(ann[k.Status()]),
		HeartbeatAt:       parseTime(ann[k.HeartbeatAt()]),
		Step:              ann[k.Step()],
		URI:               ann[k.URI()],
		CompletedAt:       parseTime(ann[k.CompletedAt()]),
		Message:           ann[k.Message()],
	}
}

// LastCheckpoint returns the time of the gang's latest durable checkpoint
// as reported by its responder: the newer of last-checkpoint-at and the
// completed-at of a ready-to-stop answer. Zero when unknown.
func (k Keys) LastCheckpoint(ann map[string]string) time.Time {
	last := parseTime(ann[k.LastCheckpointAt()])
	if r := k.ParseResponse(ann); r.Status == StatusReadyToStop && r.CompletedAt.After(last) {
		last = r.CompletedAt
	}
	return last
}

// RequestPatch returns the annotation values (for a merge patch) that
// write r.
func (k Keys) RequestPatch(r Request) map[string]any {
	m := map[string]any{
		k.Request:       r.State,
		k.RequestID():   r.ID,
		k.RequestedAt(): FormatTime(r.RequestedAt),
		k.Deadline():    nilIfEmpty(FormatTime(r.Deadline)),
		k.Reason():      nilIfEmpty(r.Reason),
		k.Requester():   nilIfEmpty(r.Requester),
	}
	return m
}

// ClearRequestPatch returns the annotation values (for a merge patch) that
// remove the request keys.
func (k Keys) ClearRequestPatch() map[string]any {
	m := map[string]any{}
	for _, key := range k.RequestKeys() {
		m[key] = nil
	}
	return m
}

// ResponsePatch returns the annotation values (for a merge patch) that
// write r; empty fields are removed.
func (k Keys) ResponsePatch(r Response) map[string]any {
	return map[string]any{
		k.ObservedRequestID(): nilIfEmpty(r.ObservedRequestID),
		k.Status():            nilIfEmpty(string(r.Status)),
		k.HeartbeatAt():       nilIfEmpty(FormatTime(r.HeartbeatAt)),
		k.Step():              nilIfEmpty(r.Step),
		k.URI():               nilIfEmpty(r.URI),
		k.CompletedAt():       nilIfEmpty(FormatTime(r.CompletedAt)),
		k.Message():           nilIfEmpty(r.Message),
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// SupportOf reads the protocol label (or, failing that, annotation) of a
// root object.
func (k Keys) SupportOf(labels, annotations map[string]string) Support {
	v, ok := labels[k.Protocol()]
	if !ok {
		v, ok = annotations[k.Protocol()]
	}
	if !ok {
		return SupportUnknown
	}
	switch strings.ToLower(v) {
	case "none", "false", "no", "unsupported", "off":
		return SupportNo
	default:
		return SupportYes
	}
}
