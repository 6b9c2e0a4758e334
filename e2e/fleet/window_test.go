//go:build e2e

package fleete2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFleetClosedWindowWaits: the canary's maintenance window opens at the
// next whole minute at least 25 seconds away (the run's first gate answers
// within about 5 of the test's start on two busy cores; a cron schedule has
// minutes only, so the test waits 25-85s). The gate answers "not yet"
// (exit 4) with the opening time, Argo retries it with backoff, and the
// cluster starts only once the window is open. It runs beside
// TestFleetResumesAfterKills, which touches only the training cell.
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
	s.waitFor(t, "the gate to answer not yet", 2*time.Minute, func() bool {
		_, st := s.states(t)
		g := st[canary].Step("gate")
		return len(g.History) > 0
	})
	_, states := s.states(t)
	g := states[canary].Step("gate")
	if h := g.History[0]; h.ExitCode != 4 || !strings.Contains(h.Message, "opens at "+open.Format(time.RFC3339)) {
		t.Errorf("first gate attempt: %+v", h)
	}
	if states[canary].AdmittedAt != nil && time.Now().Before(open) {
		t.Fatal("admitted before the window opened")
	}
	s.waitPhase(t, "Succeeded", 8*time.Minute)
	_, states = s.states(t)
	c := states[canary]
	if c.AdmittedAt == nil || c.AdmittedAt.Before(open) {
		t.Errorf("admitted at %v, window opens at %s", c.AdmittedAt, open)
	}
	g = c.Step("gate")
	waits := 0
	for _, h := range g.History {
		if h.ExitCode == 4 {
			waits++
		}
	}
	if waits == 0 || g.Phase != "completed" {
		t.Errorf("gate: %d not-yet answers, phase %s", waits, g.Phase)
	}
	t.Logf("the gate answered not yet %d times, then admitted canary at %s (window %s)", waits, c.AdmittedAt.Format(time.RFC3339), open.Format(time.RFC3339))
	e.nodesUpgraded(t, canary)
}
