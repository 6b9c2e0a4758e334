//go:build e2e

package fleete2e

import (
	"slices"
	"testing"
	"time"
)

// TestFleetRingCapTwoClusters: two clusters in one ring under the ring's
// maxConcurrent 1, where nothing else keeps them apart (they are no DR
// pair, and the fleet's caps let both in flight): the plan holds them to
// the cap (one cluster a batch, the ring template's parallelism 1), and on
// the real workflow-controller, from the store's admission and finish
// times, the second is admitted only after the first finished.
func TestFleetRingCapTwoClusters(t *testing.T) {
	e := env(t)
	e.resetPools(t, canary, prod, training)
	rings := `  - {name: first, selector: {matchLabels: {gpufleet.dev/ring: canary}}}
  - {name: pair, selector: {matchExpressions: [{key: gpufleet.dev/ring, operator: In, values: [prod, training]}]}, maxConcurrent: 1}`
	s := e.newScenario(t, "ringcap", e.s3Store("ringcap"), rings, "  caps: {maxConcurrentClusters: 2, maxGPUPercentInFlight: 100}\n")
	defer s.deleteRun(t)
	s.start(t)
	s.waitPhase(t, "Succeeded", 10*time.Minute)
	p, states := s.states(t)
	r, ok := p.Ring("pair")
	var in []string
	var batches [][]string
	for _, b := range r.Batches {
		batches = append(batches, b.Clusters)
		if len(b.Clusters) > 1 {
			t.Errorf("ring pair's batch %v runs more clusters together than its cap of 1", b.Clusters)
		}
		in = append(in, b.Clusters...)
	}
	if !ok || r.MaxConcurrent != 1 || !slices.Equal(slices.Sorted(slices.Values(in)), []string{prod, training}) {
		t.Fatalf("ring pair planned as %+v: want prod and training under maxConcurrent 1", r)
	}
	if p.MaxClustersInFlight < 2 {
		t.Fatalf("the fleet cap is %d clusters: it, not the ring's, would keep them apart", p.MaxClustersInFlight)
	}
	a, b := states[prod], states[training]
	for _, c := range []string{prod, training} {
		if st := states[c]; st.AdmittedAt == nil || st.FinishedAt == nil {
			t.Fatalf("%s: admitted %v, finished %v", c, st.AdmittedAt, st.FinishedAt)
		}
	}
	if b.AdmittedAt.Before(*a.AdmittedAt) {
		a, b = b, a
	}
	if !b.AdmittedAt.After(*a.FinishedAt) {
		t.Errorf("ring pair had two clusters in flight: the second admitted at %s, the first finished at %s", b.AdmittedAt.Format(time.RFC3339Nano), a.FinishedAt.Format(time.RFC3339Nano))
	}
	t.Logf("ring pair, batches %v under maxConcurrent 1: first in flight %s to %s, second admitted %s",
		batches, a.AdmittedAt.Format(time.RFC3339), a.FinishedAt.Format(time.RFC3339), b.AdmittedAt.Format(time.RFC3339))
	for _, c := range []string{canary, prod, training} {
		e.nodesUpgraded(t, c)
	}
}
