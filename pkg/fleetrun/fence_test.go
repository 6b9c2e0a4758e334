package fleetrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// envToken is the fencing token a command was given ("" when none).
func envToken(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, FencingTokenEnv+"="); ok {
			return v
		}
	}
	return ""
}

// TestFencingTokenReachesCommandsAndTakeoverFences: a runner claims the
// drain and its command gets the claim's fencing token; its heartbeat goes
// stale to a second runner, which takes the step over through its own
// claim, with a larger token that its command gets; the first runner's
// next write of the step is refused, it stops, and the store's record of
// the step is the second claim's, token and all.
func TestFencingTokenReachesCommandsAndTakeoverFences(t *testing.T) {
	h := newHarness(t, nil)
	h.p.Heartbeat = 20 * time.Millisecond
	cp, _ := h.p.Plan.Cluster("canary-a")
	var drain Step
	for _, s := range cp.Steps {
		if s.Kind == StepDrain {
			drain = s
			break
		}
		if r := h.step(t, "canary-a", s.Name); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s.Name, r)
		}
	}
	before := h.state(t, "canary-a").Fence
	h.exec.mu.Lock()
	h.exec.block = true
	h.exec.mu.Unlock()
	drainTokens := func() []string {
		h.exec.mu.Lock()
		defer h.exec.mu.Unlock()
		var out []string
		for i, c := range h.exec.calls {
			if len(c) > 1 && c[0] == BinGangDrain && c[1] == "run" {
				out = append(out, envToken(h.exec.envs[i]))
			}
		}
		return out
	}
	waitFor := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(drainTokens()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("waited for %d drain commands, saw %d", n, len(drainTokens()))
			}
			time.Sleep(5 * time.Millisecond)
		}
		return drainTokens()
	}

	first := make(chan error, 1)
	go func() {
		_, err := h.p.RunStep(context.Background(), "canary-a", drain.Name)
		first <- err
	}()
	tokens := waitFor(1)
	if want := fmt.Sprint(before + 1); tokens[0] != want {
		t.Fatalf("the first runner's drain got %s=%q, want %q", FencingTokenEnv, tokens[0], want)
	}

	// The second runner sees the first's heartbeat an hour old.
	other := *h.p
	other.Holder = "other/2"
	later := h.clock.Add(time.Hour)
	other.Now = func() time.Time { return later }
	ctx2, stop2 := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := other.RunStep(ctx2, "canary-a", drain.Name)
		second <- err
	}()
	select {
	case err := <-first:
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "taken over by another runner") {
			t.Fatalf("the first runner ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first runner did not stop after its step was taken over")
	}
	tokens = waitFor(2)
	if want := fmt.Sprint(before + 2); tokens[1] != want {
		t.Fatalf("the second runner's drain got %s=%q, want %q (the first had %s)", FencingTokenEnv, tokens[1], want, tokens[0])
	}
	ss := h.state(t, "canary-a").Step(drain.Name)
	if ss.Holder != "other/2" || ss.Fence != before+2 || ss.Phase != PhaseInProgress {
		t.Fatalf("the step's record after the takeover: holder %q, token %d, %s; want other/2, %d, in-progress", ss.Holder, ss.Fence, ss.Phase, before+2)
	}
	stop2()
	<-second
}
