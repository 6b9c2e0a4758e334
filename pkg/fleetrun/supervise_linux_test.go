package fleetrun

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHelperProcess is not a test: the test binary run as a step
// (GPUFLEET_TEST_STEP) or as the supervisor (GPUFLEET_TEST_SUPERVISE);
// run as a test, it does nothing.
func TestHelperProcess(t *testing.T) {
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	switch {
	case os.Getenv("GPUFLEET_TEST_SUPERVISE") == "1":
		Supervise(args, nil, io.Discard, io.Discard, 2*time.Second)
	case os.Getenv("GPUFLEET_TEST_STEP") == "1":
		os.Setenv("GPUFLEET_TEST_STEP", "")
		os.Setenv("GPUFLEET_TEST_SUPERVISE", "1")
		ex := ExecPlugins{Supervisor: []string{os.Args[0], "-test.run=^TestHelperProcess$", "--"}}
		_, _ = ex.Run(context.Background(), args, nil, io.Discard, io.Discard)
	}
}

// TestKilledStepTakesItsCommandsWithIt: a step killed with SIGKILL leaves
// no command running, not even what the command started in the background
// (a provider CLI a script launched).
func TestKilledStepTakesItsCommandsWithIt(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	step := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "--", "sh", "-c", "sleep 300 & echo $! > "+pidFile+"; wait")
	step.Env = append(os.Environ(), "GPUFLEET_TEST_STEP=1")
	if err := step.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 {
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := step.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = step.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the command's background child %d outlived the killed step", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHolderGone: a holder on this machine whose process is gone is
// taken over at once; a live one, or another machine's, is not.
func TestHolderGone(t *testing.T) {
	h, _ := os.Hostname()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if !holderGone(h + "/" + strconv.Itoa(c.Process.Pid)) {
		t.Error("an exited process is not gone")
	}
	if holderGone(h + "/" + strconv.Itoa(os.Getpid())) {
		t.Error("this process is gone")
	}
	if holderGone("another-host/1") {
		t.Error("another machine's holder is gone")
	}
}

// TestKilledAttemptIsRecorded: a step whose process died mid-attempt (its
// state left in progress by a holder of this machine that no longer runs)
// is taken over at once, and the dead attempt is kept as evidence.
func TestKilledAttemptIsRecorded(t *testing.T) {
	h := newHarness(t, nil)
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers"} {
		h.step(t, "canary-a", s)
	}
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	dead := host + "/" + strconv.Itoa(c.Process.Pid)
	st := h.state(t, "canary-a")
	ss := st.Step("pool-gpu-a-1-38-drain")
	now := h.clock
	ss.Phase, ss.Attempt, ss.Holder, ss.StartedAt, ss.Heartbeat = PhaseInProgress, 1, dead, &now, &now
	if err := WriteState(context.Background(), h.p.Store, st); err != nil {
		t.Fatal(err)
	}
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-drain")
	if r.ExitCode != 0 || r.Attempt != 2 {
		t.Fatalf("take-over of a dead holder's step: %+v", r)
	}
	got := h.state(t, "canary-a").Step("pool-gpu-a-1-38-drain")
	if len(got.History) < 1 || !strings.Contains(got.History[0].Message, "abandoned: "+dead+" stopped without recording an end") {
		t.Fatalf("history %+v", got.History)
	}
	found := false
	for _, k := range got.Evidence {
		if strings.Contains(k, "/1/") && strings.HasSuffix(k, "meta.json") {
			found = true
		}
	}
	if !found {
		t.Errorf("no evidence of the killed attempt 1 in %v", got.Evidence)
	}
}
