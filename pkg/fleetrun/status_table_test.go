package fleetrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
)

// The status of a run of the fleet fixture (testdata/fleet.yaml), one
// cluster named as long as a provider's: the default tables fit 120
// columns, -o wide keeps every value (the message too) whole.
func TestStatusTableFits(t *testing.T) {
	at := func(h, m int) *time.Time { v := time.Date(2026, 11, 3, h, m, 0, 0, time.UTC); return &v }
	msg := "step pool-h100-c failed: upgrade-pool --context prod-use1-gpu-h100-training-east --pool h100-c --version v1.38.1 exited 1:\nnode pool h100-c: 2 of 4 nodes did not become Ready within 30m"
	s := &Status{Fleet: "gpu-prod", Run: "gpu-prod-20261102-0930", Target: "v1.38", Phase: "halted",
		Workflow: &WorkflowView{Namespace: "gpufleet-system", Name: "gpu-prod-20261102-0930", Phase: "Running"},
		Rings: []RingStatus{
			{Name: "canary", Phase: "done", Clusters: 3, Completed: 3},
			{Name: "prod", Phase: "halted", Clusters: 2, Completed: 1, Failed: 1, MaxFailures: 0, ApprovalsNeeded: 2,
				Approvers: []string{"oncall-primary@example.com", "platform-lead@example.com"}, Halt: "ring prod halted: prod-use1-gpu-h100-training-east failed"},
			{Name: "training", Phase: "pending", Clusters: 1, ApprovalsNeeded: 1},
		},
		Clusters: []ClusterStatus{
			{Name: "canary-a", Ring: "canary", Batch: 1, Phase: "done", StepsDone: 15, Steps: 15, Attempts: 1, AdmittedAt: at(9, 0), FinishedAt: at(10, 2)},
			{Name: "prod-use1-gpu-h100-training-east", Ring: "prod", Batch: 2, Phase: "failed", Step: "pool-h100-c-drain-and-upgrade", StepsDone: 9, Steps: 15,
				Attempts: 2, AdmittedAt: at(9, 5), Message: msg},
			{Name: "train-a", Ring: "training", Batch: 1, Phase: "pending", Steps: 15},
		}}
	var b strings.Builder
	if err := PrintStatusTable(&b, s, cli.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "status.table.golden", b.String())
	goldenfile.CheckFits(t, b.String(), cli.DefaultTableWidth)
	b.Reset()
	if err := PrintStatusTable(&b, s, cli.TableOptions{Wide: true}); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "status.wide.golden", b.String())
	if strings.Contains(b.String(), cli.ElisionMark) || !strings.Contains(b.String(), "did not become Ready within 30m") {
		t.Errorf("-o wide must keep every value whole:\n%s", b.String())
	}
}

// TestStatusWaitIsNotForApprove: a timed wait until a gate's opening is
// not shown as waiting for approve, which does not release it; a hold is.
func TestStatusWaitIsNotForApprove(t *testing.T) {
	s := &Status{Fleet: "f", Run: "r", Target: "v1.38", Phase: "running",
		Workflow: &WorkflowView{Namespace: "argo", Name: "f-r", Phase: "Running", Waiting: []Resumed{
			{Node: "f-r.canary.a(0).wait", Kind: SuspendWait, Ring: "canary", Cluster: "a", Step: "gate"},
			{Node: "f-r.prod.b(0).hold", Kind: SuspendHold, Ring: "prod", Cluster: "b", Step: "drain"},
		}}}
	var b strings.Builder
	if err := PrintStatusTable(&b, s, cli.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "waiting for its opening: f-r.canary.a(0).wait (wait, ring canary a gate)") ||
		!strings.Contains(out, "waiting for approve: f-r.prod.b(0).hold (hold, ring prod b drain)") {
		t.Errorf("status:\n%s", out)
	}
}

// TestStatusWaitOpensAt: a timed wait's opening is its node's start plus
// its seconds, as the controller ends it; the table prints it.
func TestStatusWaitOpensAt(t *testing.T) {
	run := map[string]string{"gpufleet.dev/fleet": "f", "gpufleet.dev/run": "r"}
	w := suspendedWorkflow("f-r", run, "kind", SuspendWait, "ring", "canary", "cluster", "-", "step", "gate", "seconds", "90")
	if err := unstructured.SetNestedField(w.Object, "2026-12-07T20:00:00Z", "status", "nodes", "f-r-1", "startedAt"); err != nil {
		t.Fatal(err)
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{WorkflowGVR: "WorkflowList"}, w)
	_, waiting, err := WorkflowPhase(context.Background(), dyn, "argo", "f-r")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 7, 20, 1, 30, 0, time.UTC)
	if len(waiting) != 1 || waiting[0].OpensAt == nil || !waiting[0].OpensAt.Equal(want) {
		t.Fatalf("waiting %+v, want one wait opening at %s", waiting, want)
	}
	s := &Status{Fleet: "f", Run: "r", Target: "v1.38", Phase: "running",
		Workflow: &WorkflowView{Namespace: "argo", Name: "f-r", Phase: "Running", Waiting: waiting}}
	var b strings.Builder
	if err := PrintStatusTable(&b, s, cli.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "waiting for its opening at 2026-12-07T20:01:30Z: f-r.hold (wait, ring canary gate)") {
		t.Errorf("status:\n%s", b.String())
	}
}
