package fleetrun

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
)

// suspendedWorkflow is a Workflow with one running suspend node of the
// given inputs, labelled as render labels it.
func suspendedWorkflow(name string, labels map[string]string, kv ...string) *unstructured.Unstructured {
	var ps []any
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, map[string]any{"name": kv[i], "value": kv[i+1]})
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"metadata": map[string]any{"name": name, "namespace": "argo"},
		"status": map[string]any{"phase": "Running", "nodes": map[string]any{
			name + "-1": map[string]any{"name": name + ".hold", "type": "Suspend", "phase": "Running", "inputs": map[string]any{"parameters": ps}},
		}},
	}}
	w.SetLabels(labels)
	return w
}

// TestResumeRunReleasesClusterWorkflows: with a Workflow per cluster, a
// cluster's hold is a node of that cluster's Workflow; approve's resume
// and status's waiting list reach it through the run's labels, and leave
// another run's Workflows alone.
func TestResumeRunReleasesClusterWorkflows(t *testing.T) {
	run := map[string]string{"gpufleet.dev/fleet": "f", "gpufleet.dev/run": "r1"}
	child := func(c string) map[string]string {
		return map[string]string{"gpufleet.dev/fleet": "f", "gpufleet.dev/run": "r1", "gpufleet.dev/cluster": c}
	}
	other := map[string]string{"gpufleet.dev/fleet": "f", "gpufleet.dev/run": "r2", "gpufleet.dev/cluster": "a"}
	objs := []runtime.Object{
		suspendedWorkflow(WorkflowName("f", "r1"), run, "kind", SuspendApproval, "ring", "prod"),
		suspendedWorkflow("f-r1-a-x1", child("a"), "kind", SuspendHold, "ring", "canary", "cluster", "a", "step", "drain"),
		suspendedWorkflow("f-r1-b-x2", child("b"), "kind", SuspendHold, "ring", "canary", "cluster", "b", "step", "verify"),
		suspendedWorkflow("f-r2-a-x3", other, "kind", SuspendHold, "ring", "canary", "cluster", "a", "step", "drain"),
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{WorkflowGVR: "WorkflowList"}, objs...)
	ctx := context.Background()
	phase, waiting, err := RunPhase(ctx, dyn, "argo", "f", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if phase != "Running" || len(waiting) != 3 {
		t.Fatalf("phase %s, waiting %+v: want the run's approval and both clusters' holds", phase, waiting)
	}
	got, err := ResumeRun(ctx, dyn, "argo", "f", "r1", "approved", time.Unix(0, 0), SuspendSelector{Kind: SuspendHold, Cluster: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Cluster != "a" || got[0].Node != "f-r1-a-x1/f-r1-a-x1.hold" {
		t.Fatalf("resumed %+v, want cluster a's hold in its own Workflow", got)
	}
	phaseOf := func(name string) string {
		w, err := dyn.Resource(WorkflowGVR).Namespace("argo").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, _, _ := unstructured.NestedString(w.Object, "status", "nodes", name+"-1", "phase")
		return p
	}
	for name, want := range map[string]string{"f-r1-a-x1": "Succeeded", "f-r1-b-x2": "Running", "f-r2-a-x3": "Running", WorkflowName("f", "r1"): "Running"} {
		if got := phaseOf(name); got != want {
			t.Errorf("%s's suspend node is %s, want %s", name, got, want)
		}
	}
	// A run with no Workflow at all is NotFound, as before.
	if _, err := ResumeRun(ctx, dyn, "argo", "f", "r9", "x", time.Unix(0, 0), SuspendSelector{Kind: SuspendHold}); err == nil {
		t.Error("resuming a run with no Workflow: no error")
	}
}

// TestResumeRunReleasesResubmittedWorkflow: a run stopped and resubmitted
// (`argo resubmit`: a copy named "<name>-xxxxx" with the original's
// labels) waits for its approval in the copy; approve releases it there
// and status reads the copy's phase, not the stopped original's.
func TestResumeRunReleasesResubmittedWorkflow(t *testing.T) {
	run := map[string]string{"gpufleet.dev/fleet": "f", "gpufleet.dev/run": "r1"}
	orig := suspendedWorkflow(WorkflowName("f", "r1"), run)
	orig.Object["status"] = map[string]any{"phase": "Failed", "message": "Stopped with strategy 'Stop'"}
	orig.SetCreationTimestamp(metav1.NewTime(time.Unix(100, 0)))
	copyLabels := map[string]string{"gpufleet.dev/fleet": "f", "gpufleet.dev/run": "r1", "workflows.argoproj.io/resubmitted-from-workflow": WorkflowName("f", "r1")}
	cp := suspendedWorkflow(WorkflowName("f", "r1")+"-x7k2p", copyLabels, "kind", SuspendApproval, "ring", "prod", "approvers", "1")
	cp.SetCreationTimestamp(metav1.NewTime(time.Unix(200, 0)))
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{WorkflowGVR: "WorkflowList"}, orig, cp)
	ctx := context.Background()
	phase, waiting, err := RunPhase(ctx, dyn, "argo", "f", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if phase != "Running" || len(waiting) != 1 || waiting[0].Kind != SuspendApproval {
		t.Fatalf("phase %s, waiting %+v: want the resubmitted copy running and waiting for prod's approval", phase, waiting)
	}
	got, err := ResumeRun(ctx, dyn, "argo", "f", "r1", "approved", time.Unix(300, 0), SuspendSelector{Kind: SuspendApproval, Ring: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Node != cp.GetName()+"/"+cp.GetName()+".hold" {
		t.Fatalf("resumed %+v, want prod's approval in the resubmitted copy", got)
	}
}
