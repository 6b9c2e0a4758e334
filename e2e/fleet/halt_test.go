//go:build e2e

package fleete2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// TestFleetFailingGateHaltsRing: a node of prod is broken (NotReady, no
// kubelet behind it), so prod's gate halts: the run holds, the ring is
// halted, no further cluster starts (training, next in the ring, is never
// admitted). After the fix, approve resumes the run without running a
// completed step again.
func TestFleetFailingGateHaltsRing(t *testing.T) {
	e := env(t)
	e.resetPools(t)
	ctx := context.Background()
	prodCP := e.planes[prod]
	broken := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "broken-0", Labels: map[string]string{"kubernetes.io/hostname": "broken-0"}}}
	if _, err := prodCP.Client.CoreV1().Nodes().Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prodCP.Client.CoreV1().Nodes().Delete(context.Background(), "broken-0", metav1.DeleteOptions{})
	})
	rings := `  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}, soak: 2s}
  - {name: prod, selector: {matchExpressions: [{key: gpufleet.dev/ring, operator: In, values: [prod, training]}]}, maxConcurrent: 1}`
	s := e.newScenario(t, "halt", "file://"+t.TempDir()+"/store", rings, "")
	defer s.deleteRun(t)
	s.start(t)
	s.waitFor(t, "prod's gate to hold", 6*time.Minute, func() bool { return s.waiting(t, fleetrun.SuspendHold, "prod", prod) })

	p, states := s.states(t)
	if g := states[prod].Step("gate"); g.Phase != fleetrun.PhaseFailed || g.Attempt != 1 || !strings.Contains(g.Message, "nodes-not-ready") {
		t.Errorf("prod gate: %+v", g)
	}
	if states[prod].AdmittedAt != nil || states[training].AdmittedAt != nil {
		t.Errorf("admitted under a failing gate: prod %v, training %v", states[prod].AdmittedAt, states[training].AdmittedAt)
	}
	ds, err := fleetrun.ReadDecisions(ctx, s.openStore(t), s.run)
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := p.ActiveHalt(ds, "prod", training); !ok || !strings.Contains(h.By, "gate of prod") {
		t.Errorf("ring prod is not halted: %+v", ds)
	}
	status := e.skew(t, "fleet", "status", "--store", s.store, "--run", s.run)
	if !strings.Contains(status, "halted") || !strings.Contains(status, "waiting for approve") {
		t.Errorf("status while halted:\n%s", status)
	}
	t.Logf("status while halted:\n%s", status)
	// Nothing else starts while the ring is halted.
	time.Sleep(6 * time.Second)
	if _, states := s.states(t); states[training].AdmittedAt != nil {
		t.Fatal("training started while its ring was halted")
	}
	canaryAttempts := map[string]int{}
	for _, st := range states[canary].Steps {
		canaryAttempts[st.Name] = st.Attempt
	}

	// The fix, then approve.
	if err := prodCP.Client.CoreV1().Nodes().Delete(ctx, "broken-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out := s.approve(t, "alice", "prod", "broken-0 replaced")
	if !strings.Contains(out, "resumed") {
		t.Errorf("approve resumed nothing:\n%s", out)
	}
	s.waitPhase(t, "Succeeded", 10*time.Minute)
	_, states = s.states(t)
	for _, st := range states[canary].Steps {
		if st.Attempt != canaryAttempts[st.Name] || st.Attempt != 1 {
			t.Errorf("canary/%s ran again: attempt %d", st.Name, st.Attempt)
		}
	}
	if g := states[prod].Step("gate"); g.Phase != fleetrun.PhaseCompleted || g.Attempt != 2 {
		t.Errorf("prod gate after approve: %+v", g)
	}
	for _, c := range p.Clusters {
		if states[c.Name].FinishedAt == nil {
			t.Errorf("%s did not finish", c.Name)
		}
		e.nodesUpgraded(t, c.Name)
	}
}
