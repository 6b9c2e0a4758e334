package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

var jobsets = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

var target = checkpoint.Target{Resource: jobsets, Namespace: "ml", Name: "train"}

func newDynamic() *dynamicfake.FakeDynamicClient {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("jobset.x-k8s.io/v1alpha2")
	u.SetKind("JobSet")
	u.SetNamespace("ml")
	u.SetName("train")
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{jobsets: "JobSetList"}, u)
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, sprintf(format, args...))
}

func (l *logs) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

func newAgent(c *dynamicfake.FakeDynamicClient, dir string, l *logs) *Agent {
	return &Agent{Client: c, Target: target, Keys: checkpoint.DefaultKeys(), Dir: Dir(dir),
		PollInterval: 10 * time.Millisecond, FilePollInterval: 5 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond, Logf: l.logf}
}

// start runs a in the background; stop ends it and waits.
func start(t *testing.T, a *Agent) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func request(t *testing.T, c *dynamicfake.FakeDynamicClient, id string) checkpoint.Request {
	t.Helper()
	req := checkpoint.Request{State: checkpoint.Requested, ID: id, RequestedAt: time.Now(), Deadline: time.Now().Add(time.Hour), Reason: "test"}
	if err := (&checkpoint.Requester{Client: c, Keys: checkpoint.DefaultKeys()}).Request(context.Background(), target, req, nil); err != nil {
		t.Fatal(err)
	}
	return req
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func state(t *testing.T, c *dynamicfake.FakeDynamicClient) checkpoint.State {
	t.Helper()
	st, err := checkpoint.Read(context.Background(), c, checkpoint.DefaultKeys(), target)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

func TestAgentAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		want                checkpoint.Status
		message             string
	}{
		{"ready", ReadyFile, `{"id":"r1","step":42,"uri":"s3://b/42"}`, checkpoint.StatusReadyToStop, ""},
		{"failed", FailedFile, `{"message":"bucket full"}`, checkpoint.StatusFailed, "bucket full"},
		{"declined", DeclinedFile, `{"id":"r1","message":"last epoch"}`, checkpoint.StatusDeclined, "last epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dir, l := newDynamic(), t.TempDir(), &logs{}
			start(t, newAgent(c, dir, l))
			request(t, c, "r1")
			waitFor(t, "request.json", func() bool { return exists(dir, RequestFile) })
			// Never ready without the trainer's file.
			time.Sleep(50 * time.Millisecond)
			if st := state(t, c); st.Response.Status != checkpoint.StatusInProgress {
				t.Fatalf("status %q before the trainer answered, want in-progress", st.Response.Status)
			}
			write(t, dir, tc.file, tc.content)
			waitFor(t, "the answer", func() bool { return state(t, c).Response.Status == tc.want })
			st := state(t, c)
			if st.Response.ObservedRequestID != "r1" || st.Response.Message != tc.message {
				t.Errorf("response %+v", st.Response)
			}
			if tc.want == checkpoint.StatusReadyToStop && (st.Response.Step != "42" || st.Response.URI != "s3://b/42" || st.LastCheckpoint.IsZero()) {
				t.Errorf("response %+v last %v", st.Response, st.LastCheckpoint)
			}
		})
	}
}

// TestAgentRestartAnswersOnce stops the agent while the trainer works: the
// next agent neither writes the request again nor answers twice.
func TestAgentRestartAnswersOnce(t *testing.T) {
	c, dir, l := newDynamic(), t.TempDir(), &logs{}
	stop := start(t, newAgent(c, dir, l))
	request(t, c, "r1")
	waitFor(t, "request.json", func() bool { return exists(dir, RequestFile) })
	stop()
	st1, _ := os.Stat(filepath.Join(dir, RequestFile))
	if exists(dir, CancelledFile) {
		t.Fatal("a stopping agent withdrew the request")
	}
	write(t, dir, ReadyFile, `{"step":"9"}`)
	stop2 := start(t, newAgent(c, dir, l))
	waitFor(t, "ready-to-stop", func() bool { return state(t, c).Response.Status == checkpoint.StatusReadyToStop })
	st2, _ := os.Stat(filepath.Join(dir, RequestFile))
	if !os.SameFile(st1, st2) || !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("the restarted agent wrote request.json again")
	}
	stop2()
	// A third agent finds the final answer and does nothing.
	before := len(c.Actions())
	start(t, newAgent(c, dir, l))
	time.Sleep(60 * time.Millisecond)
	for _, a := range c.Actions()[before:] {
		if a.GetVerb() == "patch" {
			t.Errorf("an agent patched an answered request again: %v", a)
		}
	}
	if n := l.count("answering ready-to-stop"); n != 1 {
		t.Errorf("answered ready-to-stop %d times, want 1:\n%s", n, strings.Join(l.lines, "\n"))
	}
	if n := l.count("written to request.json"); n != 1 {
		t.Errorf("request written %d times, want 1", n)
	}
}

// TestAgentWithdrawn: a request cancelled before the trainer answered
// reaches it as cancelled (resume), and the root object records honestly
// that the trainer never answered: withdrawn, not declined.
func TestAgentWithdrawn(t *testing.T) {
	c, dir, l := newDynamic(), t.TempDir(), &logs{}
	start(t, newAgent(c, dir, l))
	req := request(t, c, "r1")
	waitFor(t, "request.json", func() bool { return exists(dir, RequestFile) })
	if err := (&checkpoint.Requester{Client: c, Keys: checkpoint.DefaultKeys()}).Cancel(context.Background(), target, req, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cancelled", func() bool { return exists(dir, CancelledFile) && !exists(dir, RequestFile) })
	waitFor(t, "withdrawn", func() bool { return state(t, c).Response.Status == checkpoint.StatusWithdrawn })
	msg := state(t, c).Response.Message
	for _, want := range []string{"withdrawn before the gang answered", "the trainer never answered", "no touch of progress", "told to resume (cancelled)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "training resumed") || exists(dir, StoppedFile) {
		t.Errorf("message %q, stopped file %v", msg, exists(dir, StoppedFile))
	}
	// A request cancelled after the trainer answered (no checkpoint runs)
	// reaches it too.
	req2 := request(t, c, "r2")
	waitFor(t, "request r2", func() bool { r, _, ok := Dir(dir).ReadRequest(); return ok && r.ID == "r2" })
	if exists(dir, CancelledFile) {
		t.Error("cancelled left over from r1")
	}
	write(t, dir, ReadyFile, `{"id":"r2"}`)
	waitFor(t, "ready", func() bool { return state(t, c).Response.Status == checkpoint.StatusReadyToStop })
	if err := (&checkpoint.Requester{Client: c, Keys: checkpoint.DefaultKeys()}).Cancel(context.Background(), target, req2, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "r2 withdrawn", func() bool { return exists(dir, CancelledFile) && !exists(dir, RequestFile) })
}

// TestAgentStopIsNotACancellation: a request that ends because the gang
// was stopped must not tell the trainer to resume (it may still be in a
// long SIGTERM grace period): the agent writes stopped and leaves
// request.json, so a trainer that knows only request.json keeps pausing.
// An older requester removes the request keys after the stop instead of
// writing stopped; after a ready-to-stop answer that is a stop too.
func TestAgentStopIsNotACancellation(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(rq *checkpoint.Requester) error
	}{
		{"stopped", func(rq *checkpoint.Requester) error { return rq.MarkStopped(context.Background(), target) }},
		{"keys removed after ready-to-stop", func(rq *checkpoint.Requester) error { return rq.Clear(context.Background(), target) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dir, l := newDynamic(), t.TempDir(), &logs{}
			start(t, newAgent(c, dir, l))
			request(t, c, "r1")
			waitFor(t, "request.json", func() bool { return exists(dir, RequestFile) })
			write(t, dir, ReadyFile, `{"id":"r1","step":7}`)
			waitFor(t, "ready", func() bool { return state(t, c).Response.Status == checkpoint.StatusReadyToStop })
			if err := tc.end(&checkpoint.Requester{Client: c, Keys: checkpoint.DefaultKeys()}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "stopped", func() bool { return Dir(dir).ReadStopped() == "r1" })
			time.Sleep(50 * time.Millisecond)
			if exists(dir, CancelledFile) || !exists(dir, RequestFile) {
				t.Errorf("cancelled %v, request.json %v: the trainer would resume", exists(dir, CancelledFile), exists(dir, RequestFile))
			}
			if st := state(t, c).Response; st.Status != checkpoint.StatusReadyToStop || st.Step != "7" {
				t.Errorf("the answer changed after the stop: %+v", st)
			}
			if n := l.count("wrote stopped"); n != 1 {
				t.Errorf("stop told %d times, want once:\n%s", n, strings.Join(l.lines, "\n"))
			}
			// The next request starts clean.
			request(t, c, "r2")
			waitFor(t, "request r2", func() bool { r, _, ok := Dir(dir).ReadRequest(); return ok && r.ID == "r2" })
			if exists(dir, StoppedFile) {
				t.Error("stopped left over from r1")
			}
		})
	}
}

// TestAgentSilentTrainerStopped: the gang stopped (--on-timeout=stop)
// while the trainer never answered: the trainer is told stopped, and the
// object records that it never answered and the gang stopped.
func TestAgentSilentTrainerStopped(t *testing.T) {
	c, dir, l := newDynamic(), t.TempDir(), &logs{}
	start(t, newAgent(c, dir, l))
	request(t, c, "r1")
	waitFor(t, "request.json", func() bool { return exists(dir, RequestFile) })
	if err := (&checkpoint.Requester{Client: c, Keys: checkpoint.DefaultKeys()}).MarkStopped(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "withdrawn", func() bool { return state(t, c).Response.Status == checkpoint.StatusWithdrawn })
	msg := state(t, c).Response.Message
	for _, want := range []string{"stopped before it answered", "the trainer never answered", "told the gang is stopping (stopped)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if Dir(dir).ReadStopped() != "r1" || exists(dir, CancelledFile) || !exists(dir, RequestFile) {
		t.Errorf("stopped %q cancelled %v request %v", Dir(dir).ReadStopped(), exists(dir, CancelledFile), exists(dir, RequestFile))
	}
}

func TestAgentHeartbeatNeedsProgress(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	dir, l := t.TempDir(), &logs{}
	a := &Agent{Dir: Dir(dir), ProgressTimeout: 10 * time.Second, Now: clock, Logf: l.logf}
	a.setCurrent("r1", now)
	req := checkpoint.Request{ID: "r1"}
	if !a.alive(req) {
		t.Fatal("not alive right after the request")
	}
	now = now.Add(11 * time.Second)
	if a.alive(req) {
		t.Fatal("alive after 11s without progress")
	}
	write(t, dir, ProgressFile, "")
	if err := os.Chtimes(filepath.Join(dir, ProgressFile), now, now); err != nil {
		t.Fatal(err)
	}
	if !a.alive(req) {
		t.Fatal("not alive after touching progress")
	}
	if l.count("heartbeat withheld") != 1 || l.count("heartbeat resumed") != 1 {
		t.Errorf("log %q", l.lines)
	}
	a.ProgressTimeout = 0
	now = now.Add(time.Hour)
	if !a.alive(req) {
		t.Error("--progress-timeout 0 must keep the heartbeat")
	}
}

func TestAgentPublishesLastCheckpoint(t *testing.T) {
	c, dir, l := newDynamic(), t.TempDir(), &logs{}
	start(t, newAgent(c, dir, l))
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	if err := WriteFileAtomic(dir, LastCheckpointFile, []byte(`{"at":"`+at.Format(time.RFC3339)+`","step":500}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "last-checkpoint-at", func() bool { return state(t, c).LastCheckpoint.Equal(at) })
	time.Sleep(50 * time.Millisecond)
	if n := l.count("published last checkpoint"); n != 1 {
		t.Errorf("published %d times, want once", n)
	}
}

func TestAgentPermissions(t *testing.T) {
	for _, verb := range []string{"get", "patch"} {
		c := newDynamic()
		request(t, c, "r1") // so that the running agent patches too
		c.PrependReactor(verb, "jobsets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "train", errors.New("RBAC: no"))
		})
		a := newAgent(c, t.TempDir(), &logs{})
		err := a.Check(context.Background())
		var pe *PermissionError
		if !errors.As(err, &pe) || pe.Verb != verb || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "deploy/rbac/checkpoint-agent.yaml") {
			t.Errorf("%s: %v", verb, err)
		}
		// Losing the permission while running ends Run with the error.
		done := make(chan error, 1)
		go func() { done <- a.Run(context.Background()) }()
		select {
		case err := <-done:
			if !errors.As(err, &pe) {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run kept going without permission")
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
