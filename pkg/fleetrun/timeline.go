package fleetrun

import (
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// Span is a projected stretch of the run: when something is expected to
// start and end if every step takes its expected duration, every gate
// passes at once and approvals come when asked for.
type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// project fills the plan's projected timeline: each ring starts when the
// ring before it ended plus its soak (the first from now), each batch when
// the batch before it ended, and each cluster's disruptive steps one after
// the other at the next start their windows and freezes allow
// (NextStart), each taking its kind's expected duration. A cluster no
// window ever lets start has no projection, nor has anything after it.
func project(f *fleetfile.Fleet, p *Plan, now time.Time) {
	t := now.UTC().Truncate(time.Minute)
	for ri := range p.Rings {
		r := &p.Rings[ri]
		ringStart, ringEnd, ok := t, t, true
		bt := t
		for bi := range r.Batches {
			b := &r.Batches[bi]
			end := bt
			for _, name := range b.Clusters {
				cp, _ := p.Cluster(name)
				sp, found := projectCluster(f, cp, bt)
				if !found {
					ok = false
					break
				}
				cp.Projected = &sp
				if sp.End.After(end) {
					end = sp.End
				}
			}
			if !ok {
				break
			}
			b.Projected = &Span{Start: bt, End: end}
			bt, ringEnd = end, end
		}
		if !ok {
			return
		}
		r.Projected = &Span{Start: ringStart, End: ringEnd}
		t = ringEnd.Add(fleetfile.Duration(r.Soak).Value())
	}
}

// projectCluster runs a cluster's steps on paper from from: each disruptive
// step at its next start, for its expected duration.
func projectCluster(f *fleetfile.Fleet, cp *ClusterPlan, from time.Time) (Span, bool) {
	cur, first := from, time.Time{}
	for _, s := range cp.Steps {
		if !s.Disruptive {
			continue
		}
		d := expectedDuration(f.Spec.Upgrade, s)
		start, ok, _ := NextStart(f, cp.Labels, cur, d)
		if !ok {
			return Span{}, false
		}
		if first.IsZero() {
			first = start
		}
		cur = start.Add(d)
	}
	if first.IsZero() {
		first = from
	}
	return Span{Start: first.UTC(), End: cur.UTC()}, true
}
