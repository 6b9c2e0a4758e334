package fleetrun

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// notReady turns a node of a cluster NotReady.
func (h *harness) notReady(t *testing.T, cluster, node string) {
	t.Helper()
	ctx := context.Background()
	n, err := h.kube[cluster].CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	if _, err := h.kube[cluster].CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestQuadrantHealthyProceedsOrRunsAgain: old version and healthy runs the
// upgrade (not yet while it rolls); at target and healthy proceeds; the
// message says which quadrant.
func TestQuadrantHealthyProceedsOrRunsAgain(t *testing.T) {
	h := newHarness(t, nil)
	upToUpgrade(t, h)
	h.exec.lazy = true
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "quadrant "+QuadrantRunAgain) {
		t.Fatalf("old and healthy: %+v", r)
	}
	h.clock = h.clock.Add(2 * time.Hour)
	h.exec.lazy = false
	r = h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.ExitCode != 0 || !strings.Contains(r.Message, "all 2 nodes of pool gpu-a are Ready (quadrant "+QuadrantDone+")") {
		t.Fatalf("at target and healthy: %+v", r)
	}
}

// TestQuadrantUnhealthyStops: a pool with a NotReady node is not upgraded
// at all; the step stops for a person (here the canary ring's budget of 0
// halts it) with the quadrant in its evidence.
func TestQuadrantUnhealthyStops(t *testing.T) {
	const up = "upgrade-pool --context canary-a"
	h := newHarness(t, nil)
	upToUpgrade(t, h)
	h.notReady(t, "canary-a", "canary-a-n2")
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.Phase != PhaseFailed || r.ExitCode != cli.ExitFindings || h.exec.count(up) != 0 ||
		!strings.Contains(r.Message, "1 of 2 nodes of pool gpu-a are not Ready (quadrant old version, unhealthy: stop for a person, nothing issued") ||
		!strings.Contains(r.Message, "ring canary halts") {
		t.Fatalf("old and unhealthy: %+v, %d commands", r, h.exec.count(up))
	}
	found := false
	for _, k := range r.Evidence {
		if strings.HasSuffix(k, "meta.json") {
			b, err := h.p.Store.Read(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			found = strings.Contains(string(b), "quadrant old version, unhealthy")
		}
	}
	if !found {
		t.Errorf("no meta.json of %v holds the quadrant", r.Evidence)
	}
}

// TestQuadrantUnhealthyWhileRolling: a node NotReady after the upgrade was
// issued is not yet while the step's expected duration runs (the provider
// may be replacing it), and a stop for a person after it.
func TestQuadrantUnhealthyWhileRolling(t *testing.T) {
	h := newHarness(t, nil)
	upToUpgrade(t, h)
	h.exec.lazy = true
	if r := h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade"); r.ExitCode != cli.ExitIncomplete {
		t.Fatalf("issued: %+v", r)
	}
	h.notReady(t, "canary-a", "canary-a-n1")
	h.clock = h.clock.Add(10 * time.Minute)
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "quadrant old version, unhealthy: the upgrade may still be rolling until") {
		t.Fatalf("unhealthy while rolling: %+v", r)
	}
	h.clock = h.clock.Add(time.Hour)
	r = h.step(t, "canary-a", "pool-gpu-a-1-38-upgrade")
	if r.Phase != PhaseFailed || !strings.Contains(r.Message, "quadrant old version, unhealthy: stop for a person, still unhealthy 1h0m0s after the step's first attempt") {
		t.Fatalf("unhealthy past the expected duration: %+v", r)
	}
}
