//go:build e2e

package fleete2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// TestFleetClosedWindowWaits: the canary's maintenance window opens at the
// next whole minute at least 25 seconds away (the run's first gate answers
// within about 5 of the test's start on two busy cores; a cron schedule has
// minutes only, so the test waits 25-85s). The gate answers "not yet"
// with the opening time and is no attempt: it writes nothing, the pod
// hands the seconds until the opening to the Workflow (--wait-file), and
// the Workflow waits in a timed suspend (kind "wait") until then, with no
// retry in between. The cluster starts only once the window is open, at
// its gate's first attempt. It runs beside TestFleetResumesAfterKills,
// which touches only the training cell.
func TestFleetClosedWindowWaits(t *testing.T) {
	t.Parallel()
	e := env(t)
	e.resetPools(t, canary)
	open := time.Now().UTC().Add(25 * time.Second).Truncate(time.Minute).Add(time.Minute)
	rings := `  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}}`
	window := fmt.Sprintf("  windows:\n  - {selector: {matchLabels: {gpufleet.dev/ring: canary}}, schedule: \"%d %d * * *\", duration: 10m, timeZone: UTC}\n", open.Minute(), open.Hour())
	s := e.newScenario(t, "window", "file://"+t.TempDir()+"/store", rings, window)
	defer s.deleteRun(t)
	s.start(t)
	s.waitFor(t, "the gate to wait for the window", 2*time.Minute, func() bool {
		return s.waiting(t, fleetrun.SuspendWait, "", canary)
	})
	if !time.Now().Before(open) {
		t.Fatalf("the wait began after the window opened at %s: the test proves nothing", open.Format(time.RFC3339))
	}
	_, states := s.states(t)
	if g := states[canary].Step("gate"); g.Attempt != 0 || len(g.History) != 0 || len(g.Evidence) != 0 || states[canary].AdmittedAt != nil {
		t.Errorf("waiting for the window, the gate has attempt %d, history %+v, evidence %v, admitted %v: want nothing written", g.Attempt, g.History, g.Evidence, states[canary].AdmittedAt)
	}
	s.waitPhase(t, "Succeeded", 8*time.Minute)
	_, states = s.states(t)
	c := states[canary]
	if c.AdmittedAt == nil || c.AdmittedAt.Before(open) {
		t.Errorf("admitted at %v, window opens at %s", c.AdmittedAt, open)
	}
	g := c.Step("gate")
	if g.Attempt != 1 || g.Phase != "completed" || len(g.History) != 1 || g.History[0].ExitCode != 0 {
		t.Errorf("gate: attempt %d, phase %s, history %+v: want one attempt, at the opening", g.Attempt, g.Phase, g.History)
	}
	t.Logf("the gate waited for the window without an attempt, then admitted canary at %s (window %s)", c.AdmittedAt.Format(time.RFC3339), open.Format(time.RFC3339))
	e.nodesUpgraded(t, canary)
}
