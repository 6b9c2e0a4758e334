package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// Files of the contract between the agent and the trainer, in the shared
// directory (an emptyDir both containers mount). The agent writes
// RequestFile and CancelledFile; the trainer writes the others. Every file
// is written whole: to a temporary name in the same directory, then
// renamed (rename is atomic within one file system), so a reader sees the
// old file, the new one, or none, never half of one.
const (
	// RequestFile holds the request the trainer must answer (FileRequest).
	RequestFile = "request.json"
	// CancelledFile says the request it names was withdrawn before the
	// gang was stopped: resume training. It replaces RequestFile.
	CancelledFile = "cancelled"
	// StoppedFile says the request it names ended because the gang is
	// being stopped (FileStopped): stay paused, do not resume, and exit on
	// SIGTERM. RequestFile stays, so a trainer that knows only the
	// request and cancelled files keeps pausing too.
	StoppedFile = "stopped"
	// ReadyFile is the trainer's answer once its checkpoint is durable and
	// stepping has paused (FileAnswer with step and uri).
	ReadyFile = "ready.json"
	// FailedFile is the trainer's answer when the checkpoint could not be
	// written (FileAnswer with message).
	FailedFile = "failed.json"
	// DeclinedFile is the trainer's answer when it will not yield now
	// (FileAnswer with message).
	DeclinedFile = "declined.json"
	// ProgressFile is touched by the trainer while it works on a request:
	// its modification time is the trainer's heartbeat.
	ProgressFile = "progress"
	// LastCheckpointFile may be written by the trainer after any durable
	// checkpoint, periodic ones included (FileLastCheckpoint).
	LastCheckpointFile = "last-checkpoint.json"
)

// answerFiles are the trainer's answer files, in the order they are read.
var answerFiles = []string{ReadyFile, FailedFile, DeclinedFile}

// FileRequest is the content of RequestFile.
type FileRequest struct {
	// ID is the request id; answers carry it back.
	ID string `json:"id"`
	// State is "requested" (a withdrawn request removes the file).
	State string `json:"state"`
	// RequestedAt is when the drain asked.
	RequestedAt time.Time `json:"requestedAt,omitzero"`
	// Deadline is when the drain stops waiting for ready.json.
	Deadline time.Time `json:"deadline,omitzero"`
	// Reason and Requester are for humans.
	Reason    string `json:"reason,omitempty"`
	Requester string `json:"requester,omitempty"`
}

// FileStopped is the content of StoppedFile.
type FileStopped struct {
	// ID is the request that ended.
	ID string `json:"id"`
	// Reason is for humans.
	Reason string `json:"reason,omitempty"`
}

// FileAnswer is the content of ReadyFile, FailedFile and DeclinedFile.
type FileAnswer struct {
	// ID is the request answered. When present it must match the current
	// request, or the file is stale and ignored. When absent the file
	// answers the request in RequestFile, provided it is not older than
	// RequestFile.
	ID string `json:"id,omitempty"`
	// Step is the training step the checkpoint holds (a string or a
	// number).
	Step Step `json:"step,omitempty"`
	// URI is where the checkpoint is.
	URI string `json:"uri,omitempty"`
	// Message says why, for failed and declined.
	Message string `json:"message,omitempty"`
}

// FileLastCheckpoint is the content of LastCheckpointFile.
type FileLastCheckpoint struct {
	// At is when the checkpoint became durable; the file's modification
	// time when absent.
	At   time.Time `json:"at,omitzero"`
	Step Step      `json:"step,omitempty"`
	URI  string    `json:"uri,omitempty"`
}

// Step is a training step written as a JSON string or number.
type Step string

// UnmarshalJSON accepts "123" and 123.
func (s *Step) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = Step(v)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("step: want a string or a number, got %s", b)
	}
	*s = Step(n.String())
	return nil
}

// WriteFileAtomic writes data to dir/name through a temporary file in dir,
// synced, then renamed over name.
func WriteFileAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	// The trainer may run as another user sharing the emptyDir.
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Dir is the shared directory of the file contract.
type Dir string

func (d Dir) path(name string) string { return filepath.Join(string(d), name) }

// ReadRequest returns the request in RequestFile; ok is false when there is
// none (or it cannot be parsed, which for a file only the agent writes
// atomically means it was not written by this contract).
func (d Dir) ReadRequest() (FileRequest, time.Time, bool) {
	data, st, err := d.read(RequestFile)
	if err != nil {
		return FileRequest{}, time.Time{}, false
	}
	var r FileRequest
	if json.Unmarshal(data, &r) != nil || r.ID == "" {
		return FileRequest{}, time.Time{}, false
	}
	return r, st.ModTime(), true
}

func (d Dir) read(name string) ([]byte, fs.FileInfo, error) {
	f, err := os.Open(d.path(name))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, nil, err
	}
	return b.Bytes(), st, nil
}

// WriteRequest delivers a new request: it removes the answer,
// cancellation and stop files left from earlier requests, then writes
// RequestFile atomically.
func (d Dir) WriteRequest(req checkpoint.Request) error {
	for _, name := range append([]string{CancelledFile, StoppedFile}, answerFiles...) {
		if err := os.Remove(d.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	data, err := json.MarshalIndent(FileRequest{ID: req.ID, State: checkpoint.Requested, RequestedAt: req.RequestedAt,
		Deadline: req.Deadline, Reason: req.Reason, Requester: req.Requester}, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(string(d), RequestFile, append(data, '\n'))
}

// Withdraw tells the trainer that request id was withdrawn: it writes
// CancelledFile (naming id) and then removes RequestFile, so a trainer that
// sees the request gone finds the reason already there.
func (d Dir) Withdraw(id string) error {
	data, _ := json.Marshal(map[string]string{"id": id})
	if err := WriteFileAtomic(string(d), CancelledFile, append(data, '\n')); err != nil {
		return err
	}
	if err := os.Remove(d.path(RequestFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Stop tells the trainer that request id ended because the gang is being
// stopped: it writes StoppedFile and leaves RequestFile in place.
func (d Dir) Stop(id, reason string) error {
	data, err := json.Marshal(FileStopped{ID: id, Reason: reason})
	if err != nil {
		return err
	}
	return WriteFileAtomic(string(d), StoppedFile, append(data, '\n'))
}

// ReadStopped returns the request id StoppedFile names ("" when none).
func (d Dir) ReadStopped() string {
	data, _, err := d.read(StoppedFile)
	if err != nil {
		return ""
	}
	var fs FileStopped
	if json.Unmarshal(data, &fs) != nil {
		return ""
	}
	return fs.ID
}

// AnswerKind says which answer file the trainer wrote.
type AnswerKind string

// Answer kinds.
const (
	AnswerNone     AnswerKind = ""
	AnswerReady    AnswerKind = "ready"
	AnswerFailed   AnswerKind = "failed"
	AnswerDeclined AnswerKind = "declined"
)

// Answer is a trainer's answer to the current request.
type Answer struct {
	Kind AnswerKind
	FileAnswer
}

// ReadAnswer returns the trainer's answer to request id, written after
// requestWritten (the modification time of RequestFile). Files that name
// another id, or carry no id and are older than the request, are stale and
// ignored; files that do not parse (yet) are ignored too: a trainer that
// writes without renaming is read again on the next poll, once it has
// finished. problems lists what was ignored, for the log.
func (d Dir) ReadAnswer(id string, requestWritten time.Time) (a Answer, problems []string) {
	kinds := map[string]AnswerKind{ReadyFile: AnswerReady, FailedFile: AnswerFailed, DeclinedFile: AnswerDeclined}
	for _, name := range answerFiles {
		data, st, err := d.read(name)
		if err != nil {
			continue
		}
		var fa FileAnswer
		if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
			problems = append(problems, fmt.Sprintf("%s is not a JSON object (yet); reading it again", name))
			continue
		}
		if err := json.Unmarshal(data, &fa); err != nil {
			problems = append(problems, fmt.Sprintf("%s does not parse yet (%v); reading it again", name, err))
			continue
		}
		if fa.ID != "" && fa.ID != id {
			problems = append(problems, fmt.Sprintf("%s answers request %s, not %s: stale, ignored", name, fa.ID, id))
			continue
		}
		if fa.ID == "" && st.ModTime().Before(requestWritten) {
			problems = append(problems, fmt.Sprintf("%s has no id and is older than %s: stale, ignored", name, RequestFile))
			continue
		}
		return Answer{Kind: kinds[name], FileAnswer: fa}, problems
	}
	return Answer{}, problems
}

// ProgressAt returns the modification time of ProgressFile (zero when
// absent).
func (d Dir) ProgressAt() time.Time {
	st, err := os.Stat(d.path(ProgressFile))
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// ReadLastCheckpoint returns the time of the checkpoint in
// LastCheckpointFile (zero when absent or unparseable).
func (d Dir) ReadLastCheckpoint() (FileLastCheckpoint, bool) {
	data, st, err := d.read(LastCheckpointFile)
	if err != nil {
		return FileLastCheckpoint{}, false
	}
	var lc FileLastCheckpoint
	if len(bytes.TrimSpace(data)) > 0 {
		if json.Unmarshal(data, &lc) != nil {
			return FileLastCheckpoint{}, false
		}
	}
	if lc.At.IsZero() {
		lc.At = st.ModTime()
	}
	return lc, true
}

// quote renders a string for a one-line log.
func quote(s string) string { return strconv.Quote(s) }
