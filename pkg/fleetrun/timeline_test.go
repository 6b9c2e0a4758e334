package fleetrun

import (
	"testing"
	"time"
)

// TestPlanTimelineFromEarlierRings: each ring is projected from the end of
// the ring before it plus its soak, not from now, and each batch after the
// one before it; a window that closes between two steps pushes the second
// to its next opening.
func TestPlanTimelineFromEarlierRings(t *testing.T) {
	f := loadFleet(t, nil)
	p := mustPlan(t, f, infos(f, nil), monday0930) // Mon 2026-11-02 17:30Z
	const ts = "2006-01-02T15:04Z"
	span := func(s *Span) string {
		if s == nil {
			return "none"
		}
		return s.Start.Format(ts) + " " + s.End.Format(ts)
	}
	// 7 clusters of 64 GPUs, a cap of 25%: 112 GPUs, one cluster per
	// batch. Two 1h disruptive steps (drain, upgrade) per cluster.
	want := map[string]string{
		// Three batches of 2h.
		"canary": "2026-11-02T17:30Z 2026-11-02T23:30Z",
		// Soak 2h: Tue 01:30Z; the prod window opens 01:00 Los Angeles
		// (09:00Z): prod-euw1 09:00-11:00Z; prod-use1 drains 11:00-12:00Z,
		// its upgrade would end past the 04:45 LA finish margin and waits
		// for Wednesday 09:00Z.
		"prod": "2026-11-03T01:30Z 2026-11-04T10:00Z",
		// Soak 3d: Saturday 10:00Z; the window next opens Monday.
		"prod-2": "2026-11-07T10:00Z 2026-11-09T11:00Z",
		// Soak 1d, no window.
		"training": "2026-11-10T11:00Z 2026-11-10T13:00Z",
	}
	for _, r := range p.Rings {
		if got := span(r.Projected); got != want[r.Name] {
			t.Errorf("ring %s projected %s, want %s", r.Name, got, want[r.Name])
		}
	}
	r, _ := p.Ring("canary")
	if got := span(r.Batches[1].Projected); got != "2026-11-02T19:30Z 2026-11-02T21:30Z" {
		t.Errorf("canary batch 2 projected %s: after batch 1", got)
	}
	c, _ := p.Cluster("prod-use1")
	if got := span(c.Projected); got != "2026-11-03T11:00Z 2026-11-04T10:00Z" {
		t.Errorf("prod-use1 projected %s", got)
	}
	// NextWindow stays what the windows say from the plan's time.
	if c.NextWindow == nil || !c.NextWindow.Equal(time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("prod-use1 next window %v", c.NextWindow)
	}
}
