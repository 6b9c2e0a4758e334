package fleetrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// evidenceOf lists the evidence keys of a cluster's step.
func (h *harness) evidenceOf(t *testing.T, cluster, step string) []string {
	t.Helper()
	keys, err := h.p.Store.List(context.Background(), "runs/r1/evidence/"+cluster+"/"+step+"/")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestGateNotYetIsNoAttempt: a gate step held by the clock (a closed
// window, a freeze) or by the store (an approval) starts no attempt and
// writes no evidence, however often it is asked (its record says why it
// waits); the clock's waits answer
// with the next opening, the others with none. When the window opens the
// first attempt is attempt 1.
func TestGateNotYetIsNoAttempt(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = h.clock.Add(2 * time.Hour) // the canary ring's soak
	opens := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		r := h.step(t, "prod-use1", "gate")
		if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(opens) || len(r.Evidence) != 0 {
			t.Fatalf("ask %d, window closed: %+v (next %v), want not yet, no attempt, next opening %s", i, r, r.NextAt, opens)
		}
		h.clock = h.clock.Add(15 * time.Minute)
	}
	if w := h.state(t, "prod-use1").Step("gate").Waiting; w == nil || w.Reason != "window" || w.Until == nil || !w.Until.Equal(opens) {
		t.Errorf("the waiting gate's record %+v: want waiting on the window until %s", w, opens)
	}
	if keys := h.evidenceOf(t, "prod-use1", "gate"); len(keys) != 0 {
		t.Errorf("the waiting gate wrote evidence %v", keys)
	}
	h.clock = opens.Add(30 * time.Minute)
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != 0 || r.Attempt != 1 || r.NextAt != nil {
		t.Fatalf("window open: %+v", r)
	}

	// A freeze: its end is the opening.
	h = newHarness(t, nil)
	h.clock = time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC)
	r := h.step(t, "canary-a", "gate")
	if want := time.Date(2027, 1, 5, 0, 0, 0, 0, time.UTC); r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(want) {
		t.Errorf("freeze: %+v (next %v), want next opening %s", r, r.NextAt, want)
	}

	// Approvals: not yet, no attempt, and no opening the clock knows.
	h = newHarness(t, nil)
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC)
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = h.clock.Add(2 * time.Hour)
	r = h.step(t, "prod-use1", "gate")
	if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt != nil || !strings.Contains(r.Message, "0 of 2 approvals") {
		t.Errorf("no approval: %+v (next %v)", r, r.NextAt)
	}
	if keys := h.evidenceOf(t, "prod-use1", "gate"); len(keys) != 0 {
		t.Errorf("the gate waiting for approvals wrote evidence %v", keys)
	}
}

// TestSoakAnswersItsOpening: a cluster gate asked during the earlier
// ring's soak answers when the soak ends.
func TestSoakAnswersItsOpening(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC) // the prod window is open
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	done := h.clock
	h.clock = h.clock.Add(30 * time.Minute)
	r := h.step(t, "prod-use1", "gate")
	if want := done.Add(2 * time.Hour); r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(want) {
		t.Errorf("during the soak: %+v (next %v), want %s", r, r.NextAt, want)
	}
}

// TestDisruptiveStepWaitWritesOnce: a disruptive step refused by its
// window answers the next opening and records why once; asking again
// with the same answer writes nothing.
func TestDisruptiveStepWaitWritesOnce(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC)
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers"} {
		if r := h.step(t, "prod-use1", s); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s, r)
		}
	}
	// 04:00 LA: too late in the window for the drain; Wednesday 01:00 LA
	// is the next start.
	h.clock = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	want := time.Date(2026, 11, 4, 9, 0, 0, 0, time.UTC)
	var versions []string
	for i := 0; i < 3; i++ {
		r := h.step(t, "prod-use1", "pool-gpu-a-1-38-drain")
		if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(want) {
			t.Fatalf("drain late in the window: %+v (next %v), want %s", r, r.NextAt, want)
		}
		_, v, err := h.p.Store.ReadVersion(context.Background(), StateKey("r1", "prod-use1"))
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
		h.clock = h.clock.Add(time.Minute)
	}
	if versions[1] != versions[0] || versions[2] != versions[0] {
		t.Errorf("state versions %v: the same answer was written again", versions)
	}
}
