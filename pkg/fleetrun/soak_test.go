package fleetrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// TestSoakFromTheStore: the soak is read from the store, not the engine's
// suspend: the ring gate after the canary ring and the first gate of the
// next ring wait until the ring's last cluster finished a soak ago, so a
// run resumed past its suspend, resubmitted or run by hand keeps it.
func TestSoakFromTheStore(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.HaltOn = nil })
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC) // the prod window is open
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	g, err := h.p.GateRing(context.Background(), "canary")
	if err != nil {
		t.Fatal(err)
	}
	if g.ExitCode != cli.ExitIncomplete || !strings.Contains(g.Reason(), "soak: ring canary finished at 2026-11-03T09:30:00Z, soak 2h: opens at 2026-11-03T11:30:00Z") {
		t.Fatalf("ring gate before the soak ends: %s %s", g.Verdict, g.Reason())
	}
	for _, who := range []string{"alice", "bob"} {
		h.decide(t, Decision{Decision: DecisionApprove, Ring: "prod", By: who})
	}
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "opens at 2026-11-03T11:30:00Z") {
		t.Fatalf("next ring during the soak: %+v", r)
	}
	h.clock = time.Date(2026, 11, 3, 11, 30, 0, 0, time.UTC)
	if g, _ := h.p.GateRing(context.Background(), "canary"); g.ExitCode != 0 {
		t.Fatalf("ring gate after the soak: %s", g.Reason())
	}
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != 0 {
		t.Fatalf("next ring after the soak: %+v", r)
	}
}
