package fleetrun

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// TestFreezeCoversTheWholeStep: with a freeze from midnight UTC, a one-hour
// step does not start at 23:30 the evening before (it would run into the
// freeze); it waits for the freeze's end. The expected duration is the
// step kind's own (spec.upgrade.stepDurations): a 15-minute etcd snapshot
// would fit, a 2-hour drain would not.
func TestFreezeCoversTheWholeStep(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) {
		f.Spec.Freezes = []fleetfile.Freeze{{Start: "2026-11-03T00:00:00Z", End: "2026-11-04T00:00:00Z", Reason: "launch day"}}
		f.Spec.Upgrade.StepDurations = map[string]fleetfile.Duration{"drain": "2h"}
	})
	h.clock = time.Date(2026, 11, 2, 23, 30, 0, 0, time.UTC)
	r := h.step(t, "canary-a", "gate")
	if r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "would run into the freeze 2026-11-03T00:00:00Z to 2026-11-04T00:00:00Z (launch day)") ||
		!strings.Contains(r.Message, "the next start that fits is 2026-11-04T00:00:00Z") {
		t.Fatalf("gate at 23:30 before a midnight freeze: %+v", r)
	}
	// At 21:30 a 2h drain still ends before midnight; at 22:30 it does not.
	h.clock = time.Date(2026, 11, 2, 21, 30, 0, 0, time.UTC)
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers"} {
		if r := h.step(t, "canary-a", s); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s, r)
		}
	}
	h.clock = time.Date(2026, 11, 2, 22, 30, 0, 0, time.UTC)
	if r := h.step(t, "canary-a", "pool-gpu-a-1-38-drain"); r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || !strings.Contains(r.Message, "a 2h0m0s step started now would run into the freeze") {
		t.Fatalf("2h drain at 22:30: %+v", r)
	}
	h.clock = time.Date(2026, 11, 2, 21, 45, 0, 0, time.UTC)
	if r := h.step(t, "canary-a", "pool-gpu-a-1-38-drain"); r.ExitCode != 0 {
		t.Fatalf("2h drain at 21:45: %+v", r)
	}
}
