//go:build e2e

package gangdraine2e

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// TestGangDrainRestoreAfterNodesReplaced: a provider replaces the drained
// nodes (deletes them, adds new ones at the new version), taking the run's
// node records with it; restore of the run still finds the Kueue gang by
// the record on its JobSet and Kueue readmits it on the new nodes.
func TestGangDrainRestoreAfterNodesReplaced(t *testing.T) {
	e := newEnv(t, 2, 6*time.Minute)
	e.queues(16)
	js := e.jobSet("train", e.pool, 4, 4, "none")
	sel := selJobSet("train")
	e.waitReady(sel, 4)
	old := append([]string(nil), e.nodes...)
	r := e.run(append([]string{"run", "-o", "json", "--on-timeout=stop", "--poll-interval=250ms"}, old...)...)
	if r.ExitCode != 0 {
		t.Fatalf("run: %s", r)
	}
	rep := decode[gangdrain.RunReport](t, r)
	if len(rep.Gangs) != 1 || rep.Gangs[0].Action != gang.ActionStopped || rep.Gangs[0].Method != gang.StopKueue {
		t.Fatalf("run report: %+v", rep.RunResult)
	}
	e.waitGone(sel)
	for _, n := range old {
		if err := e.cp.Client.CoreV1().Nodes().Delete(e.ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.addNodes(2)

	// A dry run says what it would do and changes nothing.
	r = e.run("restore", rep.RunID, "--dry-run", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("restore --dry-run: %s", r)
	}
	if dr := decode[gangdrain.RestoreReport](t, r); len(dr.Gangs) != 1 || dr.Gangs[0].Action != gang.RestoreWouldRestore {
		t.Errorf("dry run: %+v", dr.RestoreResult)
	}
	if ptrTrue(e.workload(js.UID).Spec.Active) {
		t.Fatal("the dry run reactivated the workload")
	}
	r = e.run("restore", rep.RunID, "-o", "json", "--poll-interval=250ms", "--restore-timeout=2m")
	if r.ExitCode != 0 {
		t.Fatalf("restore: %s", r)
	}
	rr := decode[gangdrain.RestoreReport](t, r)
	if len(rr.Gangs) != 1 || rr.Gangs[0].Action != gang.RestoreReactivated || !rr.Gangs[0].Ready || !rr.Complete {
		t.Errorf("restore: %+v", rr.RestoreResult)
	}
	wl := e.workload(js.UID)
	if !ptrTrue(wl.Spec.Active) || !harness.WorkloadAdmitted(wl) {
		t.Errorf("workload after restore: active %v admitted %v", wl.Spec.Active, harness.WorkloadAdmitted(wl))
	}
	for _, p := range e.pods(sel) {
		if p.Spec.NodeName == old[0] || p.Spec.NodeName == old[1] {
			t.Errorf("pod %s on a deleted node", p.Name)
		}
	}
	// The run is done: a second restore names an unknown run (exit 2).
	if r := e.run("restore", rep.RunID); r.ExitCode != 2 {
		t.Errorf("second restore: exit %d, want 2\n%s", r.ExitCode, r)
	}
}
