package agent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{`{"a":1}`, `{"a":2}`} {
		if err := WriteFileAtomic(dir, "x.json", []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "x.json"))
		if err != nil || string(got) != content {
			t.Fatalf("content %q, %v; want %q", got, err, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	st, _ := os.Stat(filepath.Join(dir, "x.json"))
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (the trainer may run as another user)", st.Mode())
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing"), "x", nil); err == nil {
		t.Error("want an error for a missing directory")
	}
}

func TestRequestAndWithdraw(t *testing.T) {
	d := Dir(t.TempDir())
	// Answers and a cancellation from an earlier request.
	write(t, string(d), ReadyFile, `{"step":1}`)
	write(t, string(d), FailedFile, `{"message":"old"}`)
	write(t, string(d), CancelledFile, `{"id":"r0"}`)
	dl := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := d.WriteRequest(checkpoint.Request{State: checkpoint.Requested, ID: "r1", Deadline: dl, Reason: "node maintenance"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ReadyFile, FailedFile, CancelledFile} {
		if _, err := os.Stat(filepath.Join(string(d), name)); !os.IsNotExist(err) {
			t.Errorf("%s from an earlier request left in place", name)
		}
	}
	req, written, ok := d.ReadRequest()
	if !ok || req.ID != "r1" || !req.Deadline.Equal(dl) || req.Reason != "node maintenance" || req.State != "requested" || written.IsZero() {
		t.Fatalf("request %+v %v %v", req, written, ok)
	}
	// The file is plain JSON with the documented field names.
	raw, _ := os.ReadFile(filepath.Join(string(d), RequestFile))
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["id"] != "r1" || m["deadline"] != "2026-01-02T03:04:05Z" || m["reason"] != "node maintenance" {
		t.Errorf("request.json %s", raw)
	}
	if err := d.Withdraw("r1"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := d.ReadRequest(); ok {
		t.Error("request.json still there after a withdrawal")
	}
	c, _ := os.ReadFile(filepath.Join(string(d), CancelledFile))
	if !strings.Contains(string(c), `"id":"r1"`) {
		t.Errorf("cancelled = %q", c)
	}
	// A partial or foreign request file is no request.
	write(t, string(d), RequestFile, `{"id":`)
	if _, _, ok := d.ReadRequest(); ok {
		t.Error("a partial request.json parsed")
	}
}

func TestReadAnswer(t *testing.T) {
	past := time.Now().Add(-time.Hour)
	cases := []struct {
		name         string
		files        map[string]string
		old          bool // answer files older than the request
		want         Answer
		wantProblems int
	}{
		{"none", nil, false, Answer{}, 0},
		{"ready with id, step as number", map[string]string{ReadyFile: `{"id":"r1","step":1200,"uri":"s3://b/1200"}`}, false,
			Answer{Kind: AnswerReady, FileAnswer: FileAnswer{ID: "r1", Step: "1200", URI: "s3://b/1200"}}, 0},
		{"ready without id, newer than the request", map[string]string{ReadyFile: `{"step":"7"}`}, false,
			Answer{Kind: AnswerReady, FileAnswer: FileAnswer{Step: "7"}}, 0},
		{"stale id", map[string]string{ReadyFile: `{"id":"r0","step":3}`}, false, Answer{}, 1},
		{"no id, older than the request", map[string]string{ReadyFile: `{"step":3}`}, true, Answer{}, 1},
		{"partial file", map[string]string{ReadyFile: `{"id":"r1","st`}, false, Answer{}, 1},
		{"empty file", map[string]string{ReadyFile: ``}, false, Answer{}, 1},
		{"stale ready, current failed", map[string]string{ReadyFile: `{"id":"r0"}`, FailedFile: `{"id":"r1","message":"bucket full"}`}, false,
			Answer{Kind: AnswerFailed, FileAnswer: FileAnswer{ID: "r1", Message: "bucket full"}}, 1},
		{"declined", map[string]string{DeclinedFile: `{"message":"last epoch"}`}, false,
			Answer{Kind: AnswerDeclined, FileAnswer: FileAnswer{Message: "last epoch"}}, 0},
		{"bad step", map[string]string{ReadyFile: `{"id":"r1","step":[1]}`}, false, Answer{}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Dir(t.TempDir())
			requestWritten := time.Now()
			for name, content := range tc.files {
				write(t, string(d), name, content)
				if tc.old {
					if err := os.Chtimes(filepath.Join(string(d), name), past, past); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !tc.old {
				requestWritten = past
			}
			got, problems := d.ReadAnswer("r1", requestWritten)
			if got != tc.want || len(problems) != tc.wantProblems {
				t.Errorf("got %+v problems %q, want %+v and %d problems", got, problems, tc.want, tc.wantProblems)
			}
		})
	}
}

func TestReadLastCheckpoint(t *testing.T) {
	d := Dir(t.TempDir())
	if _, ok := d.ReadLastCheckpoint(); ok {
		t.Error("found a checkpoint in an empty dir")
	}
	write(t, string(d), LastCheckpointFile, `{"at":"2026-01-02T03:04:05Z","step":100}`)
	lc, ok := d.ReadLastCheckpoint()
	if !ok || lc.At != time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) || lc.Step != "100" {
		t.Errorf("%+v %v", lc, ok)
	}
	write(t, string(d), LastCheckpointFile, ``) // touched: the file's time counts
	if lc, ok := d.ReadLastCheckpoint(); !ok || time.Since(lc.At) > time.Minute {
		t.Errorf("touched file: %+v %v", lc, ok)
	}
	write(t, string(d), LastCheckpointFile, `{"at":`)
	if _, ok := d.ReadLastCheckpoint(); ok {
		t.Error("a partial file parsed")
	}
}

func TestReadLabelsFile(t *testing.T) {
	dir := t.TempDir()
	// The downward API writes one key="value" per line, values quoted.
	write(t, dir, "labels", "app=\"trainer\"\njobset.sigs.k8s.io/jobset-name=\"llm\"\nnote=\"a \\\"b\\\"\"\n")
	got, err := ReadLabelsFile(filepath.Join(dir, "labels"))
	if err != nil || got["jobset.sigs.k8s.io/jobset-name"] != "llm" || got["note"] != `a "b"` || len(got) != 3 {
		t.Errorf("%v %v", got, err)
	}
	write(t, dir, "bad", "no-equals\n")
	if _, err := ReadLabelsFile(filepath.Join(dir, "bad")); err == nil {
		t.Error("want an error")
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"SIGUSR1": syscall.SIGUSR1, "usr2": syscall.SIGUSR2, "10": 10, "": 0} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseSignal("SIGFOO"); err == nil {
		t.Error("want an error")
	}
}

// TestSignalProcesses signals a child process found through a private proc
// tree (never the machine's /proc: other processes share its names).
func TestSignalProcesses(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	proc := t.TempDir()
	pdir := filepath.Join(proc, strconv.Itoa(cmd.Process.Pid))
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, pdir, "comm", "fake-trainer\n")
	other := filepath.Join(proc, "1")
	_ = os.MkdirAll(other, 0o755)
	write(t, other, "comm", "init\n")
	if _, err := SignalProcesses(proc, "nobody", syscall.SIGUSR1); err == nil || !strings.Contains(err.Error(), "shareProcessNamespace") {
		t.Errorf("no process: %v", err)
	}
	n, err := SignalProcesses(proc, "fake-trainer", syscall.SIGUSR1)
	if err != nil || n != 1 {
		t.Fatalf("signalled %d, %v", n, err)
	}
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("sleep ended with %v", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
		t.Errorf("sleep ended with %v, want killed by SIGUSR1", err)
	}
}

func TestNotRankZero(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		not    bool
	}{
		{map[string]string{"jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": "0"}, false},
		{map[string]string{"jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": "3"}, true},
		{map[string]string{"jobset.sigs.k8s.io/job-index": "1", "batch.kubernetes.io/job-completion-index": "0"}, true},
		{map[string]string{"training.kubeflow.org/replica-index": "0"}, false},
		{map[string]string{"app": "x"}, false},
	} {
		if _, _, not := NotRankZero(tc.labels); not != tc.not {
			t.Errorf("%v: not rank 0 = %v", tc.labels, not)
		}
	}
}
