//go:build e2e

package fleete2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// TestFleetClosedWindowWaits: the canary's maintenance window opens at the
// next whole minute at least 25 seconds away (the run's first gate answers
// within about 5 of the test's start on two busy cores; a cron schedule has
// minutes only, so the test waits 25-85s). The gate answers "not yet"
// with the opening time and is no attempt and no evidence (it records
// once why it waits); the pod hands the seconds until the opening to the
// Workflow (--wait-file), and the Workflow waits in a timed suspend (kind "wait") until then, with no
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
	// Held by the window for 25-85s, a gate retried at the scenario's
	// backoff (retryInterval 2s, retryCap 4s) would run a pod every 4s at
	// most: at least 6 before the opening. Waiting in the Workflow, it
	// runs one pod that answers the wait and one at the opening.
	if n := s.gatePods(t, canary); n != 1 {
		t.Errorf("waiting for the window, the gate ran %d pods: want the one that answered the wait", n)
	}
	_, states := s.states(t)
	if g := states[canary].Step("gate"); g.Attempt != 0 || len(g.History) != 0 || len(g.Evidence) != 0 || states[canary].AdmittedAt != nil {
		t.Errorf("waiting for the window, the gate has attempt %d, history %+v, evidence %v, admitted %v: want nothing written", g.Attempt, g.History, g.Evidence, states[canary].AdmittedAt)
	}
	// The wait is recorded once, with its reason and the opening.
	if w := states[canary].Step("gate").Waiting; w == nil || w.Reason != "window" || w.Until == nil || !w.Until.Equal(open) {
		t.Errorf("waiting for the window, the gate's record says %+v: want waiting on the window until %s", w, open.Format(time.RFC3339))
	}
	s.waitPhase(t, "Succeeded", 8*time.Minute)
	_, states = s.states(t)
	c := states[canary]
	if c.AdmittedAt == nil || c.AdmittedAt.Before(open) {
		t.Errorf("admitted at %v, window opens at %s", c.AdmittedAt, open)
	}
	g := c.Step("gate")
	if g.Attempt != 1 || g.Phase != "completed" || len(g.History) != 1 || g.History[0].ExitCode != 0 || g.Waiting != nil {
		t.Errorf("gate: attempt %d, phase %s, history %+v, waiting %+v: want one attempt, at the opening, and no wait left", g.Attempt, g.Phase, g.History, g.Waiting)
	}
	if n := s.gatePods(t, canary); n > 2 {
		t.Errorf("the gate ran %d pods: want 2, one that answered the wait and one at the opening, not one per backoff interval", n)
	}
	t.Logf("the gate ran %d pods and no attempt while the window was closed, then admitted canary at %s (window %s)", s.gatePods(t, canary), c.AdmittedAt.Format(time.RFC3339), open.Format(time.RFC3339))
	e.nodesUpgraded(t, canary)
}

// gatePods counts the pods the run's Workflow ran for cluster's gate step
// (nodes of type Pod whose input parameter step is gate, in the
// cluster's WorkflowTemplate).
func (s *scenario) gatePods(t *testing.T, cluster string) int {
	t.Helper()
	wf, err := s.e.dyn.Resource(fleetrun.WorkflowGVR).Namespace(argoNS).Get(context.Background(), s.workflowName(), metav1.GetOptions{})
	if err != nil {
		return 0
	}
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	n := 0
	for _, v := range nodes {
		node, _ := v.(map[string]any)
		if node["type"] != "Pod" || !strings.Contains(fmt.Sprint(node["templateScope"]), fleetrun.TemplateName(s.name, s.run, cluster)) {
			continue
		}
		params, _, _ := unstructured.NestedSlice(node, "inputs", "parameters")
		for _, p := range params {
			if pm, _ := p.(map[string]any); pm["name"] == "step" && pm["value"] == "gate" {
				n++
			}
		}
	}
	return n
}
