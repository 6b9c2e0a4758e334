package fleetrun

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestSkipReleasesTimedWait: a skipped cluster whose step waits in the
// Workflow for its window (a timed suspend of kind wait) is released at
// once, not left asleep until the opening holding its ring; another
// cluster's wait and the ring's gate wait are left alone.
func TestSkipReleasesTimedWait(t *testing.T) {
	h := prodUse1InFlight(t)
	fleet := h.p.Plan.Fleet
	child := func(c string) map[string]string {
		return map[string]string{"gpufleet.dev/fleet": fleet, "gpufleet.dev/run": "r1", "gpufleet.dev/cluster": c}
	}
	run := map[string]string{"gpufleet.dev/fleet": fleet, "gpufleet.dev/run": "r1"}
	objs := []runtime.Object{
		suspendedWorkflow(WorkflowName(fleet, "r1"), run, "kind", SuspendWait, "ring", "prod", "cluster", "-", "step", "gate", "seconds", "86400"),
		suspendedWorkflow("skipped-x1", child("prod-use1"), "kind", SuspendWait, "ring", "prod", "cluster", "prod-use1", "step", "preflight-1-38", "seconds", "86400"),
		suspendedWorkflow("other-x2", child("prod-euw1"), "kind", SuspendWait, "ring", "prod", "cluster", "prod-euw1", "step", "preflight-1-38", "seconds", "86400"),
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{WorkflowGVR: "WorkflowList"}, objs...)
	h.p.Access.Getter.(*cli.TestClientGetter).WithDynamic(dyn)
	ctx := context.Background()
	var res *DecideResult
	for _, who := range []string{"alice", "bob"} {
		var err error
		h.clock = h.clock.Add(1e9)
		res, err = h.p.Decide(ctx, Decision{Run: "r1", Decision: DecisionSkip, Cluster: "prod-use1", Reason: "RMA", At: h.clock,
			Identity: &cli.Identity{User: who}}, DecideOptions{Resume: true, Namespace: "argo"})
		if err != nil {
			t.Fatal(err)
		}
	}
	if res.WorkflowNote != "" || len(res.Resumed) != 1 || res.Resumed[0].Node != "skipped-x1/skipped-x1.hold" || res.Resumed[0].Kind != SuspendWait {
		t.Fatalf("resumed %+v (note %q), want the skipped cluster's timed wait", res.Resumed, res.WorkflowNote)
	}
	for name, want := range map[string]string{"skipped-x1": "Succeeded", "other-x2": "Running", WorkflowName(fleet, "r1"): "Running"} {
		w, err := dyn.Resource(WorkflowGVR).Namespace("argo").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(w.Object, "status", "nodes", name+"-1", "phase"); got != want {
			t.Errorf("%s's wait node is %s, want %s", name, got, want)
		}
	}
}
