package inference

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

// A replacement the drain displaced that has no node yet holds the next
// step: while the scheduler has not placed it the gate waits, and once
// the scheduler finds it Unschedulable (the headroom the plan counted on
// is gone) the run stops with the scheduler's reason instead of waiting
// for ever or draining on. A replica the plan itself left without a GPU
// may stay Unschedulable.
func TestGateHoldsOnReplicaWithNoNode(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS,
		servingPod(llamaRS, "llama-0", "p0", 4, true),
		servingPod(llamaRS, "llama-1", "spare-0", 4, true),
	)
	ctx := context.Background()
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	pool, err := r.Reader().Read(ctx, []string{"p0"})
	if err != nil {
		t.Fatal(err)
	}
	plan := Compute(pool, r.Options.Plan)
	if plan.Refused() || len(plan.Waves) != 1 {
		t.Fatalf("plan: refusals %v, waves %+v", plan.Refusals, plan.Waves)
	}
	// The wave drained p0: llama-0 is gone and its replacement has no node.
	if err := c.CoreV1().Pods("serving").Delete(ctx, "llama-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	repl := servingPod(llamaRS, "llama-2", "", 4, false)
	repl.Status.Phase = corev1.PodPending
	repl.Status.Conditions = nil
	if _, err := c.CoreV1().Pods("serving").Create(ctx, repl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gate := func(unplaced map[string]int32) error {
		gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return r.gate(gctx, plan, nil, unplaced)
	}
	if err := gate(nil); err == nil || !strings.Contains(err.Error(), "model serving/llama: 1 replica not yet scheduled (llama-2)") {
		t.Errorf("gate with llama-2 not yet scheduled: %v; want it waiting for llama-2", err)
	}

	repl.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable."}}
	if _, err := c.CoreV1().Pods("serving").UpdateStatus(ctx, repl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = gate(nil)
	if !errors.Is(err, ErrUnschedulable) || !strings.Contains(err.Error(), "llama-2: 0/2 nodes are available: 1 Insufficient nvidia.com/gpu") || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("gate with llama-2 Unschedulable: %v; want the run stopped with the scheduler's reason", err)
	}
	if err := gate(map[string]int32{"serving/llama": 1}); err != nil {
		t.Errorf("gate with llama-2 Unschedulable as planned: %v; want it passing", err)
	}
}

// A model whose serving container has no readinessProbe is Ready once its
// process starts, not once its weights are loaded: the plan refuses it
// unless --accept-no-readiness-probe, then notes it. A container with no
// GPU (a sidecar) needs none.
func TestComputeRefusesModelWithoutReadinessProbe(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	llama.Spec.Template.Spec.Containers[0].ReadinessProbe = nil
	llama.Spec.Template.Spec.Containers = append(llama.Spec.Template.Spec.Containers, corev1.Container{Name: "metrics"})
	mistral, mistralRS := servingDeployment("mistral", 2, 2, map[string]string{AnnWeightsBytes: "4M"})
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, false, nil), gpuNode("p1", h100, 8, false, nil), gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS, mistral, mistralRS,
		servingPod(llamaRS, "llama-0", "p0", 4, true), servingPod(llamaRS, "llama-1", "p1", 4, true),
		servingPod(mistralRS, "mistral-0", "p0", 2, true), servingPod(mistralRS, "mistral-1", "p1", 2, true),
	)
	p, err := (&Reader{Kube: c}).Read(context.Background(), []string{"p0", "p1"})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}
	plan := Compute(p, o)
	want := "model serving/llama: serving container server has no readinessProbe or startupProbe: its Ready means the process started, not that the weights are loaded"
	if len(plan.Refusals) != 1 || !strings.Contains(plan.Refusals[0], want) || !strings.Contains(plan.Refusals[0], "--accept-no-readiness-probe") {
		t.Errorf("refusals: %q; want one for llama only", plan.Refusals)
	}
	o.AcceptNoReadinessProbe = true
	plan = Compute(p, o)
	if plan.Refused() || !strings.Contains(strings.Join(plan.Notes, "\n"), want) {
		t.Errorf("accepted: refusals %q, notes %q; want a note for llama", plan.Refusals, plan.Notes)
	}
	// A startupProbe alone holds Ready until it passes: accepted.
	o.AcceptNoReadinessProbe = false
	llama.Spec.Template.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}, FailureThreshold: 120, PeriodSeconds: 10}
	if _, err := c.AppsV1().Deployments("serving").Update(context.Background(), llama, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, err = (&Reader{Kube: c}).Read(context.Background(), []string{"p0", "p1"}); err != nil {
		t.Fatal(err)
	}
	if plan = Compute(p, o); plan.Refused() {
		t.Errorf("startupProbe only: refusals %q; want none", plan.Refusals)
	}
}

// A model with no PodDisruptionBudget keeps a floor: --min-serving of its
// replicas, and at least one while it serves, so that no wave takes it to
// zero; the plan says why.
func TestComputeNoPDBKeepsOne(t *testing.T) {
	// One replica on each of two nodes and room for one outside the pool:
	// a wave of both nodes would take the model to 0.
	a := model("llama", 4, 8_000_000, nil, map[string]int32{"p0": 1, "p1": 1})
	plan := Compute(pool([]string{"p0", "p1"}, []int64{4}, a), Options{Bandwidth: bw})
	if plan.Refused() {
		t.Fatalf("refused: %q", plan.Refusals)
	}
	mp := plan.Model("serving/llama")
	if mp.Floor != 1 || mp.FloorFrom != "no PodDisruptionBudget: 1 kept" {
		t.Errorf("floor %d from %q; want 1 from no PodDisruptionBudget", mp.Floor, mp.FloorFrom)
	}
	if len(plan.Waves) != 2 {
		t.Errorf("waves %+v; want one node at a time", plan.Waves)
	}
	for _, w := range plan.Waves {
		if w.ServingDuring["serving/llama"] < 1 {
			t.Errorf("wave %d takes llama to %d", w.Index, w.ServingDuring["serving/llama"])
		}
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "model serving/llama has no PodDisruptionBudget: the plan keeps at least 1 of its replicas Ready") {
		t.Errorf("notes: %q", plan.Notes)
	}
	// A single replica with nowhere to go is refused, not planned to 0.
	one := model("solo", 4, 8_000_000, nil, map[string]int32{"p0": 1})
	plan = Compute(pool([]string{"p0"}, nil, one), Options{Bandwidth: bw})
	if !plan.Refused() || !strings.Contains(strings.Join(plan.Refusals, "\n"), "below its floor of 1: no PodDisruptionBudget") {
		t.Errorf("refusals %q; want solo refused at its floor of 1", plan.Refusals)
	}
	// --min-serving above one sets it.
	b := model("mistral", 2, 4_000_000, nil, map[string]int32{"p0": 2, "p1": 2})
	if mp := Compute(pool([]string{"p0", "p1"}, []int64{8}, b), Options{Bandwidth: bw, MinServing: 0.75}).Model("serving/mistral"); mp.Floor != 3 || !strings.HasPrefix(mp.FloorFrom, "--min-serving") {
		t.Errorf("mistral floor %d from %q; want 3 from --min-serving", mp.Floor, mp.FloorFrom)
	}
}

// One PodDisruptionBudget selecting the pods of two Deployments keeps its
// floor across both, as the disruption controller counts it: minAvailable
// 3 of their 4 pods lets one go at a time, where a count per model (3 of
// each model's 2) would allow none and refuse the plan.
func TestComputeSharedPDB(t *testing.T) {
	shared := pdbMin(intstr.FromInt32(3))
	a := model("llama", 4, 8_000_000, shared, map[string]int32{"p0": 1, "p1": 1})
	b := model("mistral", 2, 4_000_000, shared, map[string]int32{"p0": 1, "p1": 1})
	plan := Compute(pool([]string{"p0", "p1"}, []int64{8}, a, b), Options{Bandwidth: bw, NoSurge: true})
	if plan.Refused() {
		t.Fatalf("refused: %q", plan.Refusals)
	}
	for _, w := range plan.Waves {
		var lost int32
		for _, k := range []string{"serving/llama", "serving/mistral"} {
			lost += w.AtOnce[k]
			if plan.Start[k]-w.AtOnce[k] < 1 {
				t.Errorf("wave %d takes %s to %d", w.Index, k, plan.Start[k]-w.AtOnce[k])
			}
		}
		if lost > 1 {
			t.Errorf("wave %d: %d Ready replicas at once under minAvailable 3 of 4: %+v", w.Index, lost, w.AtOnce)
		}
	}
	if mp := plan.Model("serving/llama"); !strings.Contains(mp.FloorFrom, "shared with serving/mistral") {
		t.Errorf("llama floor from %q", mp.FloorFrom)
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "PodDisruptionBudget serving/pdb selects the pods of models serving/llama, serving/mistral: its floor of 3 (of 4) is kept across them") {
		t.Errorf("notes: %q", plan.Notes)
	}
	// Two budgets of the same name on two models are two budgets.
	c := model("qwen", 2, 4_000_000, pdbMax(intstr.FromInt32(1)), map[string]int32{"p0": 1, "p1": 1})
	d := model("phi", 2, 4_000_000, pdbMax(intstr.FromInt32(1)), map[string]int32{"p0": 1, "p1": 1})
	if p := Compute(pool([]string{"p0", "p1"}, []int64{8}, c, d), Options{Bandwidth: bw, NoSurge: true}); strings.Contains(strings.Join(p.Notes, "\n"), "selects the pods of models") {
		t.Errorf("separate budgets taken as shared: %q", p.Notes)
	}
}

// Two PodDisruptionBudgets of the same name in two namespaces are two
// budgets in the run's wait too: each allows its own model's disruption,
// where a count keyed by name alone spent team-a's on team-b's and waited
// until --timeout.
func TestGateBudgetsOfOneNameInTwoNamespaces(t *testing.T) {
	objs := []runtime.Object{
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		gpuNode("spare-0", h100, 16, false, nil),
	}
	for _, ns := range []string{"team-a", "team-b"} {
		d, rs := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
		d.Namespace, rs.Namespace = ns, ns
		one := intstr.FromInt32(1)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama", Generation: 1},
			Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: d.Spec.Selector},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}}
		objs = append(objs, d, rs, pdb, servingPod(rs, "llama-0", "p0", 4, true), servingPod(rs, "llama-1", "spare-0", 4, true))
	}
	c := fake.NewClientset(objs...)
	ctx := context.Background()
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	pool, err := r.Reader().Read(ctx, []string{"p0"})
	if err != nil {
		t.Fatal(err)
	}
	plan := Compute(pool, r.Options.Plan)
	if plan.Refused() || len(plan.Waves) != 1 || plan.Waves[0].AtOnce["team-a/llama"] != 1 || plan.Waves[0].AtOnce["team-b/llama"] != 1 {
		t.Fatalf("plan: refusals %v, waves %+v", plan.Refusals, plan.Waves)
	}
	gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := r.gate(gctx, plan, &plan.Waves[0], nil); err != nil {
		t.Errorf("gate before wave 1: %v; want it passing, each budget allowing its own model's one", err)
	}
}

// The gate keeps one Ready replica of a serving model whatever its live
// budget allows: minAvailable 50% also selecting 4 Ready pods off the
// pool allows 3 disruptions, and the wave would take both of llama's.
func TestGateKeepsOneWhateverTheBudgetAllows(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	half := intstr.FromString("50%")
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "serving", Generation: 1},
		Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: &half, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "serving"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 3, CurrentHealthy: 6, DesiredHealthy: 3, ExpectedPods: 6}}
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		llama, llamaRS, pdb,
		servingPod(llamaRS, "llama-0", "p0", 4, true), servingPod(llamaRS, "llama-1", "p0", 4, true),
	)
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	// The model as a plan that counted only llama under the budget saw it:
	// guaranteed 1 of its 2, nothing more kept.
	plan := &Plan{Models: []ModelPlan{{Model: &Model{Key: "serving/llama", Namespace: "serving", Name: "llama", Selector: "app=llama", OnPool: map[string]int32{"p0": 2}, pdb: pdb, PDB: pdb.Name}, PDBFloor: 1}},
		Waves: []Wave{{Index: 1, Nodes: []string{"p0"}, AtOnce: map[string]int32{"serving/llama": 2}}}}
	gctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.gate(gctx, plan, &plan.Waves[0], nil)
	if err == nil || !strings.Contains(err.Error(), "model serving/llama: 2 Ready, the wave takes 2 at once, at least 1 kept whatever its PodDisruptionBudget allows") {
		t.Errorf("gate: %v; want it waiting, keeping one of llama", err)
	}
}

// A budget that also selects a NotReady pod outside the models can never
// allow the wave while that pod stays so: the gate stops the run naming
// the pod (exit 4, resumable) instead of waiting for ever.
func TestGateStopsOnBudgetBlockedOutsideTheModels(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "serving", Generation: 1},
		Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "serving"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 0, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 3}}
	other, otherRS := servingDeployment("embed", 1, 1, nil)
	var pods []runtime.Object
	for _, p := range []*corev1.Pod{servingPod(llamaRS, "llama-0", "p0", 4, true), servingPod(llamaRS, "llama-1", "spare-0", 4, true), servingPod(otherRS, "embed-0", "cpu-0", 1, false)} {
		p.Labels["tier"] = "serving"
		pods = append(pods, p)
	}
	c := fake.NewClientset(append(pods,
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS, other, otherRS, pdb)...)
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	plan := &Plan{Models: []ModelPlan{{Model: &Model{Key: "serving/llama", Namespace: "serving", Name: "llama", Selector: "app=llama", OnPool: map[string]int32{"p0": 1}, pdb: pdb, PDB: pdb.Name}, PDBFloor: 1}},
		Waves: []Wave{{Index: 1, Nodes: []string{"p0"}, AtOnce: map[string]int32{"serving/llama": 1}}}}
	gctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.gate(gctx, plan, &plan.Waves[0], nil)
	if !errors.Is(err, ErrBudgetBlocked) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "it also selects 1 pod outside the models that is not Ready (embed-0)") {
		t.Errorf("gate: %v; want the run stopped naming embed-0", err)
	}
	if !errors.Is(incomplete(err), gang.ErrIncomplete) {
		t.Errorf("%v is not an incomplete run (exit 4)", err)
	}
}

// A replacement outside the pool that restarts is not loading its
// weights: the gate names the pod, its reason and restarts while it
// waits, and stops the run once the kubelet backs it off
// (CrashLoopBackOff), instead of waiting for it for ever.
func TestGateReportsFailingReplacement(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	repl := servingPod(llamaRS, "llama-2", "spare-0", 4, false)
	repl.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", RestartCount: 2,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS,
		servingPod(llamaRS, "llama-1", "spare-0", 4, true),
		repl,
	)
	ctx := context.Background()
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	plan := &Plan{Models: []ModelPlan{{Model: &Model{Key: "serving/llama", Namespace: "serving", Name: "llama", Selector: "app=llama", OnPool: map[string]int32{"p0": 1}}}}, Drained: []string{"p0"}}
	gate := func() error {
		gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return r.gate(gctx, plan, nil, nil)
	}
	err := gate()
	if err == nil || !strings.Contains(err.Error(), "model serving/llama: 1 replica not Ready and not loading weights (llama-2 on spare-0: 2 restarts, last exit 137 (OOMKilled))") {
		t.Errorf("gate with llama-2 restarting: %v; want it waiting, naming the pod, restarts and last exit", err)
	}
	repl.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	repl.Status.ContainerStatuses[0].RestartCount = 3
	if _, err := c.CoreV1().Pods("serving").UpdateStatus(ctx, repl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = gate()
	if !errors.Is(err, ErrReplicaFailing) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "llama-2 on spare-0: CrashLoopBackOff, 3 restarts, last exit 137 (OOMKilled)") {
		t.Errorf("gate with llama-2 in CrashLoopBackOff: %v; want the run stopped naming it", err)
	}
	if !errors.Is(incomplete(err), gang.ErrIncomplete) {
		t.Errorf("%v is not an incomplete run (exit 4)", err)
	}
}

// A replacement whose storage-initializer (KServe's init container that
// downloads the weights) fails is not loading its weights either: the
// gate names the init container while it restarts and stops the run once
// it is in CrashLoopBackOff.
func TestGateReportsFailingInitContainer(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	repl := servingPod(llamaRS, "llama-2", "spare-0", 4, false)
	repl.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "storage-initializer", RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	repl.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS,
		servingPod(llamaRS, "llama-1", "spare-0", 4, true),
		repl,
	)
	ctx := context.Background()
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	plan := &Plan{Models: []ModelPlan{{Model: &Model{Key: "serving/llama", Namespace: "serving", Name: "llama", Selector: "app=llama", OnPool: map[string]int32{"p0": 1}}}}, Drained: []string{"p0"}}
	gate := func() error {
		gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return r.gate(gctx, plan, nil, nil)
	}
	err := gate()
	if err == nil || !strings.Contains(err.Error(), "1 replica not Ready and not loading weights (llama-2 on spare-0: init container storage-initializer 1 restart, last exit 1 (Error))") {
		t.Errorf("gate with llama-2's storage-initializer restarting: %v; want it waiting, naming the init container", err)
	}
	repl.Status.InitContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	repl.Status.InitContainerStatuses[0].RestartCount = 4
	if _, err := c.CoreV1().Pods("serving").UpdateStatus(ctx, repl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = gate()
	if !errors.Is(err, ErrReplicaFailing) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "llama-2 on spare-0: init container storage-initializer CrashLoopBackOff, 4 restarts, last exit 1 (Error)") {
		t.Errorf("gate with llama-2's storage-initializer in CrashLoopBackOff: %v; want the run stopped naming it", err)
	}
}

// A surge scaled back behind the run's back (a GitOps sync, a person)
// stops the run naming the cause, instead of waiting on a budget planned
// at the surged count; and the wait never asks a budget for more
// disruptions than it can allow at its live expected count.
func TestGateSurgeRevertedAndLiveBudget(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llama"},
		Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: llama.Spec.Selector},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}}
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS, pdb,
		servingPod(llamaRS, "llama-0", "p0", 4, true), servingPod(llamaRS, "llama-1", "p0", 4, true),
	)
	ctx := context.Background()
	r := &Runner{Kube: c, Options: RunOptions{Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	plan := &Plan{Models: []ModelPlan{{Model: &Model{Key: "serving/llama", Namespace: "serving", Name: "llama", Selector: "app=llama", OnPool: map[string]int32{"p0": 2}, pdb: pdb, PDB: "llama"}}}}
	// The wave was planned with the surge: 2 at once of 3.
	w := &Wave{Index: 1, Nodes: []string{"p0"}, AtOnce: map[string]int32{"serving/llama": 2}}
	gate := func() error {
		gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return r.gate(gctx, plan, w, nil)
	}
	if err := gate(); err != nil {
		t.Errorf("gate with the budget allowing 1 of its 2: %v; want it passing, the eviction API pacing the second", err)
	}

	// The run surged llama to 3; a sync put it back to 2.
	if _, err := ApplySurge(ctx, c, llama, "gd-1", 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	dep, err := c.AppsV1().Deployments("serving").Get(ctx, "llama", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Replicas = ptr.To(int32(2))
	if _, err := c.AppsV1().Deployments("serving").Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	plan.Models[0].GitOps = "Flux Kustomization apps (label kustomize.toolkit.fluxcd.io/name)"
	err = gate()
	if !errors.Is(err, ErrSurgeReverted) || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "spec.replicas is 2, below what this run set when it surged it (3, run gd-1), likely by Flux Kustomization apps") {
		t.Errorf("gate with the surge reverted: %v; want the run stopped naming the cause", err)
	}
}

// A PodDisruptionBudget that selects the pods of two models allows its
// disruptions once for both: the gate before a wave that takes one Ready
// replica of each waits while the budget allows only one disruption, and
// goes once it allows two.
func TestGateSharesBudgetAcrossModels(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 1, map[string]string{AnnWeightsBytes: "8M"})
	mistral, mistralRS := servingDeployment("mistral", 2, 1, map[string]string{AnnWeightsBytes: "8M"})
	shared := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "shared"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"llama", "mistral"}}}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 4, DesiredHealthy: 2, ExpectedPods: 4}}
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned)}),
		gpuNode("spare-0", h100, 8, false, nil),
		llama, llamaRS, mistral, mistralRS, shared,
		servingPod(llamaRS, "llama-0", "p0", 1, true),
		servingPod(llamaRS, "llama-1", "spare-0", 1, true),
		servingPod(mistralRS, "mistral-0", "p0", 1, true),
		servingPod(mistralRS, "mistral-1", "spare-0", 1, true),
	)
	ctx := context.Background()
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	pool, err := r.Reader().Read(ctx, []string{"p0"})
	if err != nil {
		t.Fatal(err)
	}
	plan := Compute(pool, r.Options.Plan)
	if len(plan.Models) != 2 || plan.Models[0].PDB != "shared" || plan.Models[1].PDB != "shared" {
		t.Fatalf("models: %+v", plan.Models)
	}
	// The wave takes one Ready replica of each model at once.
	w := &Wave{Index: 1, Nodes: []string{"p0"}, AtOnce: map[string]int32{"serving/llama": 1, "serving/mistral": 1}}
	gate := func() error {
		gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return r.gate(gctx, plan, w, nil)
	}
	if err := gate(); err == nil || !strings.Contains(err.Error(), "model serving/mistral: PodDisruptionBudget shared allows 0 disruptions, the wave takes 1 at once") {
		t.Errorf("gate with 1 disruption allowed for 2 models: %v; want it waiting on mistral's share of the budget", err)
	}
	shared.Status.DisruptionsAllowed = 2
	if _, err := c.PolicyV1().PodDisruptionBudgets("serving").UpdateStatus(ctx, shared, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := gate(); err != nil {
		t.Errorf("gate with 2 disruptions allowed: %v; want it passing", err)
	}
}

// A run stopped because its replacements were Unschedulable, resumed with
// the capacity still gone, stops again (exit 4) and scales nothing back:
// a pod with no node counts as Pending before the run only when it was
// created before the run started (its nodes' started-at). What the waves
// already drained left without a GPU by the plan (recorded on their
// nodes) and pods Pending before the run may still stay Unschedulable.
func TestResumeWithHeadroomStillGone(t *testing.T) {
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		created    time.Time // the Unschedulable replica's
		recordWave []string  // a wave recorded as leaving one llama unplaced
		drained    []string  // pool nodes the run drained
		wantErr    bool
	}{
		{name: "replacement of the run, capacity gone", created: start.Add(time.Minute), drained: []string{"p0"}, wantErr: true},
		{name: "left unplaced by the plan of a drained wave", created: start.Add(time.Minute), recordWave: []string{"p0"}, drained: []string{"p0"}},
		{name: "recorded wave not drained in full", created: start.Add(time.Minute), recordWave: []string{"p0", "p1"}, drained: []string{"p0"}, wantErr: true},
		{name: "Pending before the run", created: start.Add(-time.Minute), drained: []string{"p0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
			llama.Status.ObservedGeneration = llama.Generation
			node := func(name string) *corev1.Node {
				state := gang.NodeCordoned
				for _, d := range tc.drained {
					if d == name {
						state = gang.NodeDrained
					}
				}
				return gpuNode(name, h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(state), gang.AnnWasCordoned: "false",
					gang.AnnStartedAt: start.Format(time.RFC3339), AnnInferenceRun: "gd-1", AnnInferenceModels: "serving/llama"})
			}
			repl := servingPod(llamaRS, "llama-2", "", 4, false)
			repl.CreationTimestamp = metav1.NewTime(tc.created)
			repl.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) were unschedulable."}}}
			c := fake.NewClientset(node("p0"), node("p1"), gpuNode("spare-0", h100, 4, false, nil), llama, llamaRS,
				servingPod(llamaRS, "llama-1", "spare-0", 4, true), repl)
			ctx := context.Background()
			r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}},
				Drain: gang.Options{PollInterval: time.Millisecond}}}
			if tc.recordWave != nil {
				if err := r.recordUnplaced(ctx, "gd-1", &Wave{Nodes: tc.recordWave, Unplaced: map[string]int32{"serving/llama": 1}}); err != nil {
					t.Fatal(err)
				}
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			// The pool is the drained nodes and the recorded wave's.
			pool := tc.drained
			if len(tc.recordWave) > len(pool) {
				pool = tc.recordWave
			}
			res, err := r.Run(rctx, pool)
			if res == nil || !res.Resumed {
				t.Fatalf("run: %+v, %v; want a resume of gd-1", res, err)
			}
			if tc.wantErr {
				if !errors.Is(err, ErrUnschedulable) || !errors.Is(err, gang.ErrIncomplete) || !strings.Contains(err.Error(), "llama-2: 0/3 nodes are available") {
					t.Errorf("resume: %v; want it stopped on llama-2 Unschedulable (exit 4)", err)
				}
				if res.Complete {
					t.Errorf("resume: complete, want stopped")
				}
				return
			}
			if err != nil || !res.Complete {
				t.Errorf("resume: %v (complete %v); want llama-2 allowed to stay Unschedulable", err, res.Complete)
			}
		})
	}
}

// Before a wave is drained the run records on its nodes what the plan
// leaves without a GPU once it is, for a resume to read back.
func TestRunRecordsWaveUnplaced(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	llama.Status.ObservedGeneration = llama.Generation
	c := fake.NewClientset(gpuNode("p0", h100, 8, false, nil), gpuNode("spare-0", h100, 4, false, nil), llama, llamaRS,
		servingPod(llamaRS, "llama-0", "p0", 4, true), servingPod(llamaRS, "llama-1", "spare-0", 4, true))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}},
		Drain: gang.Options{PollInterval: time.Millisecond}}}
	res, err := r.Run(ctx, []string{"p0"})
	if res == nil || res.Plan == nil || len(res.Plan.Waves) != 1 || res.Plan.Waves[0].Unplaced["serving/llama"] != 1 {
		t.Fatalf("run: %+v, %v; want one wave leaving one llama unplaced", res, err)
	}
	n, err := c.CoreV1().Nodes().Get(context.Background(), "p0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Annotations[AnnInferenceUnplaced], `{"run":"`+res.RunID+`","wave":["p0"],"unplaced":{"serving/llama":1}}`; got != want {
		t.Errorf("p0's %s: %q, want %q", AnnInferenceUnplaced, got, want)
	}
}
