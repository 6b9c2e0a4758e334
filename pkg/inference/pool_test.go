package inference

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

func gpuNode(name, product string, gpus int64, unschedulable bool, ann map[string]string) *corev1.Node {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.product": product}, Annotations: ann},
		Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": q},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// gpuSpec is a model server asking for gpus, Ready once its health
// endpoint answers.
func gpuSpec(gpus int64) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}}}}
}

func servingDeployment(name string, replicas int32, gpus int64, ann map[string]string) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	lbl := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: name, UID: types.UID("uid-" + name), Annotations: ann, ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: gpuSpec(gpus)}},
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: name + "-abc", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}}}
	return d, rs
}

func servingPod(rs *appsv1.ReplicaSet, name, node string, gpus int64, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: map[string]string{"app": strings.TrimSuffix(rs.Name, "-abc")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, Controller: ptr.To(true)}}},
		Spec:   gpuSpec(gpus),
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
	p.Spec.NodeName = node
	return p
}

func TestRead(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 3, 4, map[string]string{AnnWeightsBytes: "140Gi", AnnWeightsSource: "registry"})
	cpu, cpuRS := servingDeployment("router", 1, 0, nil)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llama"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llama"}}}}
	objs := []runtime.Object{
		gpuNode("p0", h100, 8, false, nil),
		gpuNode("p1", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeDrained)}),
		gpuNode("spare-0", h100, 8, false, nil),
		gpuNode("spare-1", h100, 8, true, nil), // cordoned: no headroom
		gpuNode("a100-0", "NVIDIA-A100-SXM4-80GB", 8, false, nil),
		llama, llamaRS, cpu, cpuRS, pdb,
		servingPod(llamaRS, "llama-0", "p0", 4, true),
		servingPod(llamaRS, "llama-1", "p0", 4, false),
		servingPod(llamaRS, "llama-2", "spare-0", 4, true),
		servingPod(cpuRS, "router-0", "p0", 0, true),
	}
	c := fake.NewClientset(objs...)
	p, err := (&Reader{Kube: c}).Read(context.Background(), []string{"p0", "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Models) != 1 {
		t.Fatalf("models: %+v", p.Models)
	}
	m := p.Models[0]
	want := Model{Key: "serving/llama", Namespace: "serving", Name: "llama", Replicas: 3, Desired: 3, Ready: 2, GPUsPerReplica: 4, Product: h100,
		Weights: &Weights{Bytes: 140 << 30, Source: SourceRegistry, From: "annotation"}, PDB: "llama", PDBRule: "minAvailable 2",
		OnPool: map[string]int32{"p0": 2}, OnPoolReady: map[string]int32{"p0": 1}, Selector: "app=llama"}
	if diff := cmp.Diff(want, *m, cmp.AllowUnexported(Model{}), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".pdb" || p.Last().String() == ".template" || p.Last().String() == ".sample"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("model (-want +got):\n%s", diff)
	}
	var head []HeadroomNode
	for _, h := range p.Headroom {
		head = append(head, HeadroomNode{Name: h.Name, Product: h.Product, FreeGPUs: h.FreeGPUs})
	}
	if diff := cmp.Diff([]HeadroomNode{{Name: "a100-0", Product: "NVIDIA-A100-SXM4-80GB", FreeGPUs: 8}, {Name: "spare-0", Product: h100, FreeGPUs: 4}}, head, cmp.AllowUnexported(HeadroomNode{})); diff != "" {
		t.Errorf("headroom (-want +got):\n%s", diff)
	}
	if !p.Nodes[1].Drained || p.Nodes[0].Drained {
		t.Errorf("nodes: %+v", p.Nodes)
	}
	if diff := cmp.Diff([]string{"serving/router-0"}, p.OtherPods); diff != "" {
		t.Errorf("other pods: %s", diff)
	}
	// Only the H100 spare fits a replica: one surge slot after reserving
	// the two displaced... none here: 4 free GPUs, two displaced replicas.
	plan := Compute(p, Options{Bandwidth: Bandwidth{SourceRegistry: 1 << 30}})
	if plan.Surge != nil {
		t.Errorf("surge without room: %+v", plan.Surge)
	}
	if plan.Waves[0].Placed["serving/llama"] != 1 || plan.Waves[0].Unplaced["serving/llama"] != 1 {
		t.Errorf("wave 1 placement: %+v", plan.Waves[0])
	}
}

func TestReadWeightsProblems(t *testing.T) {
	bad, badRS := servingDeployment("bad", 1, 1, map[string]string{AnnWeightsBytes: "huge"})
	none, noneRS := servingDeployment("none", 1, 1, nil)
	flag, flagRS := servingDeployment("flag", 1, 1, nil)
	c := fake.NewClientset(gpuNode("p0", h100, 8, false, nil), bad, badRS, none, noneRS, flag, flagRS,
		servingPod(badRS, "bad-0", "p0", 1, true), servingPod(noneRS, "none-0", "p0", 1, true), servingPod(flagRS, "flag-0", "p0", 1, true))
	p, err := (&Reader{Kube: c, Weights: map[string]Weights{"serving/flag": {Bytes: 7, Source: SourceSharedFS, From: "flag"}}}).Read(context.Background(), []string{"p0"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range p.Models {
		got[m.Name] = m.WeightsProblem
		if m.Name == "flag" && (m.Weights == nil || m.Weights.From != "flag") {
			t.Errorf("flag weights: %+v", m.Weights)
		}
	}
	if !strings.Contains(got["bad"], `"huge" is not a byte count`) {
		t.Errorf("bad: %q", got["bad"])
	}
	if want := "kubectl annotate deployment -n serving none gpufleet.dev/model-weights-bytes=<bytes, e.g. 140Gi>, or pass --weights serving/none=<bytes>"; !strings.Contains(got["none"], want) {
		t.Errorf("none: %q", got["none"])
	}
}

// The surge is recorded with the replicas it set, resumes without a
// second scale-up, and restore removes exactly it once.
func TestSurgeApplyUndo(t *testing.T) {
	d, _ := servingDeployment("llama", 3, 4, nil)
	c := fake.NewClientset(d)
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	o, err := ApplySurge(ctx, c, d, "gd-1", 2, now)
	if err != nil || o.ReplicasAfter != 5 || o.Action != ActionSurged {
		t.Fatalf("apply: %+v %v", o, err)
	}
	got, _ := c.AppsV1().Deployments("serving").Get(ctx, "llama", metav1.GetOptions{})
	if *got.Spec.Replicas != 5 || got.Labels[LabelSurgedByRun] != "gd-1" {
		t.Fatalf("after surge: replicas %d labels %v", *got.Spec.Replicas, got.Labels)
	}
	rec, ok := ReadSurgeRecord(got)
	if !ok || rec != (SurgeRecord{Run: "gd-1", ReplicasBefore: 3, ReplicasSet: 5, Surge: 2, At: "2026-12-05T00:00:00Z"}) {
		t.Errorf("record: %+v %v", rec, ok)
	}
	if o, err := ApplySurge(ctx, c, got, "gd-1", 2, now); err != nil || o.Message != "surged earlier by this run" {
		t.Errorf("resume: %+v %v", o, err)
	}
	if _, err := ApplySurge(ctx, c, got, "gd-2", 1, now); err == nil || !strings.Contains(err.Error(), "kubectl gang-drain restore gd-1") {
		t.Errorf("other run: %v", err)
	}
	// Someone scales it to 6 meanwhile: only the surge of 2 goes.
	got.Spec.Replicas = ptr.To(int32(6))
	if _, err := c.AppsV1().Deployments("serving").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dry, err := UndoRuns(ctx, c, []string{"gd-1"}, true, now)
	if err != nil || len(dry) != 1 || dry[0].Action != ActionWouldScaleBack || dry[0].ReplicasAfter != 4 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	outs, err := UndoRuns(ctx, c, []string{"gd-1"}, false, now)
	if err != nil || len(outs) != 1 || outs[0].ReplicasAfter != 4 || !strings.Contains(outs[0].Message, "set 5, now 6") {
		t.Fatalf("undo: %+v %v", outs, err)
	}
	got, _ = c.AppsV1().Deployments("serving").Get(ctx, "llama", metav1.GetOptions{})
	if *got.Spec.Replicas != 4 || got.Labels[LabelSurgedByRun] != "" || got.Annotations[AnnSurge] != "" || got.Annotations[AnnSurgeUndone] == "" {
		t.Errorf("after undo: replicas %d labels %v annotations %v", *got.Spec.Replicas, got.Labels, got.Annotations)
	}
	if outs, err := UndoRuns(ctx, c, []string{"gd-1"}, false, now); err != nil || len(outs) != 0 {
		t.Errorf("second undo: %+v %v", outs, err)
	}
}

// TestUndoSurgeLowered: replicas lowered after the surge are never taken
// below the count before the surge or the count now (a scale-down passes
// no PodDisruptionBudget).
func TestUndoSurgeLowered(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		now, after int32
	}{
		{"untouched", 5, 3},
		{"a person scaled it to 1", 1, 1},
		{"GitOps put back 3", 3, 3},
		{"lowered to 4", 4, 3},
		{"raised to 8", 8, 6},
	} {
		d, _ := servingDeployment("llama", 3, 4, nil)
		c := fake.NewClientset(d)
		if _, err := ApplySurge(ctx, c, d, "gd-1", 2, now); err != nil {
			t.Fatal(err)
		}
		got, _ := c.AppsV1().Deployments("serving").Get(ctx, "llama", metav1.GetOptions{})
		got.Spec.Replicas = ptr.To(tc.now)
		if _, err := c.AppsV1().Deployments("serving").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		outs, err := UndoRuns(ctx, c, []string{"gd-1"}, false, now)
		if err != nil || len(outs) != 1 || outs[0].ReplicasAfter != tc.after {
			t.Errorf("%s: %+v %v, want replicas %d", tc.name, outs, err, tc.after)
		}
	}
}

func TestDetectAndRunArgs(t *testing.T) {
	a := model("llama", 4, 1, pdbMin(intstr.FromInt32(1)), map[string]int32{"p0": 1})
	if d := Detect(pool([]string{"p0"}, nil, a)); !d.Inference {
		t.Errorf("detect: %+v", d)
	}
	p := pool([]string{"p0"}, nil, a)
	p.Gangs = []string{"t/JobSet/x"}
	if d := Detect(p); d.Inference {
		t.Errorf("gangs: %+v", d)
	}
	got := RunArgs("pool=a", Options{MinServing: 0.75, MaxColdStart: 10 * time.Minute, Bandwidth: Bandwidth{SourceObjectStore: 1_250_000_000}})
	want := []string{"run", "--inference", "-l", "pool=a", "--hydrate-bandwidth", "object-store=1250000000/s", "--min-serving", "0.75", "--max-cold-start", "10m0s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

// A run interrupted after draining p0 and resumed: the models p0 held
// (recorded on it) stay in the plan although nothing of them is left on
// the pool, so that the next wave waits for their replacements still
// loading their weights outside the pool.
func TestResumeWaitsForReplicasOfDrainedNode(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	mistral, mistralRS := servingDeployment("mistral", 2, 2, map[string]string{AnnWeightsBytes: "4M"})
	drainedAnn := map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeDrained), AnnInferenceRun: "gd-1", AnnInferenceModels: "serving/llama"}
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, true, drainedAnn),
		gpuNode("p1", h100, 8, true, map[string]string{gang.AnnRunID: "gd-1", gang.AnnState: string(gang.NodeCordoned), AnnInferenceRun: "gd-1"}),
		gpuNode("spare-0", h100, 8, false, nil),
		gpuNode("spare-1", h100, 8, false, nil),
		llama, llamaRS, mistral, mistralRS,
		servingPod(llamaRS, "llama-0", "spare-0", 4, true),
		servingPod(llamaRS, "llama-1", "spare-1", 4, false), // loading
		servingPod(mistralRS, "mistral-0", "p1", 2, true),
		servingPod(mistralRS, "mistral-1", "spare-0", 2, true),
	)
	ctx := context.Background()
	r := &Runner{Kube: c, Options: RunOptions{Plan: Options{NoSurge: true, Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}}, Drain: gang.Options{PollInterval: time.Millisecond}}, minServing: map[string]int32{}}
	pool, err := r.Reader().Read(ctx, []string{"p0", "p1"})
	if err != nil {
		t.Fatal(err)
	}
	plan := Compute(pool, r.Options.Plan)
	if plan.Refused() {
		t.Fatalf("refused: %v", plan.Refusals)
	}
	mp := plan.Model("serving/llama")
	if mp == nil || mp.Loading != 1 || mp.OnPoolTotal() != 0 {
		t.Fatalf("llama, displaced from the drained p0, not planned: %+v", plan.Models)
	}
	if len(plan.Waves) != 1 || plan.Waves[0].Nodes[0] != "p1" {
		t.Fatalf("waves: %+v", plan.Waves)
	}
	gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = r.gate(gctx, plan, &plan.Waves[0], nil)
	if err == nil || !strings.Contains(err.Error(), "model serving/llama: 1 replica loading weights (llama-1 on spare-1)") {
		t.Errorf("gate before wave 1: %v; want it waiting for llama-1", err)
	}
}

// markNode adds the models on a node to those recorded there by the same
// run, and starts afresh for another run.
func TestMarkNodeMergesModels(t *testing.T) {
	c := fake.NewClientset(gpuNode("p0", h100, 8, true, nil))
	ctx := context.Background()
	r := &Runner{Kube: c}
	get := func() map[string]string {
		n, err := c.CoreV1().Nodes().Get(ctx, "p0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations
	}
	for _, step := range []struct {
		run    string
		models []string
		want   string
	}{
		{"gd-1", []string{"serving/llama", "serving/mistral"}, "serving/llama,serving/mistral"},
		{"gd-1", []string{"serving/mistral"}, "serving/llama,serving/mistral"}, // resumed, llama evicted already
		{"gd-2", []string{"serving/qwen"}, "serving/qwen"},
		{"gd-3", nil, ""},
	} {
		if err := r.markNode(ctx, "p0", step.run, step.models); err != nil {
			t.Fatal(err)
		}
		a := get()
		if a[AnnInferenceRun] != step.run || a[AnnInferenceModels] != step.want {
			t.Errorf("after %s %v: run %q models %q, want %q", step.run, step.models, a[AnnInferenceRun], a[AnnInferenceModels], step.want)
		}
	}
}

// A model whose replicas a HorizontalPodAutoscaler sets is not surged (the
// autoscaler would scale the surge away); the other model is. A namespace
// whose autoscalers may not be listed is a note, not a failure.
func TestAutoscaledModelIsNotSurged(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M"})
	mistral, mistralRS := servingDeployment("mistral", 2, 2, map[string]string{AnnWeightsBytes: "4M"})
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llama-hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama"}, MaxReplicas: 2}}
	objs := []runtime.Object{
		gpuNode("p0", h100, 8, false, nil), gpuNode("p1", h100, 8, false, nil), gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS, mistral, mistralRS, hpa,
		servingPod(llamaRS, "llama-0", "p0", 4, true), servingPod(llamaRS, "llama-1", "p1", 4, true),
		servingPod(mistralRS, "mistral-0", "p0", 2, true), servingPod(mistralRS, "mistral-1", "p1", 2, true),
	}
	c := fake.NewClientset(objs...)
	p, err := (&Reader{Kube: c}).Read(context.Background(), []string{"p0", "p1"})
	if err != nil {
		t.Fatal(err)
	}
	plan := Compute(p, Options{Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}})
	if plan.Surge == nil || plan.Surge.Added["serving/llama"] != 0 || plan.Surge.Added["serving/mistral"] != 1 {
		t.Fatalf("surge: %+v, want mistral +1 and no llama", plan.Surge)
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "model serving/llama: no surge: HorizontalPodAutoscaler llama-hpa sets its replicas") {
		t.Errorf("notes: %v", plan.Notes)
	}

	c = fake.NewClientset(objs...)
	c.PrependReactor("list", "horizontalpodautoscalers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, "", errors.New("denied"))
	})
	p, err = (&Reader{Kube: c}).Read(context.Background(), []string{"p0", "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(Compute(p, Options{Bandwidth: Bandwidth{SourceObjectStore: 1}}).Notes, "\n"), "cannot list horizontalpodautoscalers in namespace serving") {
		t.Errorf("no note for the forbidden list: %v", p.Notes)
	}
}

// A Deployment a GitOps tool applies is not surged: Argo CD's self-heal or
// Flux's next sync puts spec.replicas back, and the run would wait on a
// budget planned at the surged count. Each tool's mark is read.
func TestGitOpsModelIsNotSurged(t *testing.T) {
	for _, tc := range []struct {
		labels, ann map[string]string
		want        string
	}{
		{nil, map[string]string{"argocd.argoproj.io/tracking-id": "serve:apps/Deployment:serving/llama"}, "applied by Argo CD (annotation argocd.argoproj.io/tracking-id serve:apps/Deployment:serving/llama)"},
		{map[string]string{"app.kubernetes.io/instance": "serve"}, nil, "applied by Argo CD application serve, if it tracks by label"},
		{map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps"}, nil, "applied by Flux Kustomization apps"},
		{map[string]string{"helm.toolkit.fluxcd.io/name": "llama"}, nil, "applied by Flux HelmRelease llama"},
	} {
		ann := map[string]string{AnnWeightsBytes: "8M"}
		maps.Copy(ann, tc.ann)
		llama, llamaRS := servingDeployment("llama", 2, 4, ann)
		llama.Labels = tc.labels
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
		plan := Compute(p, Options{Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}})
		if plan.Surge == nil || plan.Surge.Added["serving/llama"] != 0 || plan.Surge.Added["serving/mistral"] != 1 {
			t.Errorf("%s: surge %+v, want mistral +1 and no llama", tc.want, plan.Surge)
		}
		if !strings.Contains(strings.Join(plan.Notes, "\n"), "model serving/llama: no surge: it is "+tc.want) {
			t.Errorf("notes: %v; want %q", plan.Notes, tc.want)
		}
	}
}

// A chart installed by helm carries app.kubernetes.io/instance (the
// chart's convention) and helm's meta.helm.sh/release-name annotation:
// that label is not Argo CD's, and the model is surged.
func TestHelmInstalledModelIsSurged(t *testing.T) {
	llama, llamaRS := servingDeployment("llama", 2, 4, map[string]string{AnnWeightsBytes: "8M", "meta.helm.sh/release-name": "serve", "meta.helm.sh/release-namespace": "serving"})
	llama.Labels = map[string]string{"app.kubernetes.io/instance": "serve", "app.kubernetes.io/managed-by": "Helm"}
	c := fake.NewClientset(
		gpuNode("p0", h100, 8, false, nil), gpuNode("p1", h100, 8, false, nil), gpuNode("spare-0", h100, 16, false, nil),
		llama, llamaRS,
		servingPod(llamaRS, "llama-0", "p0", 4, true), servingPod(llamaRS, "llama-1", "p1", 4, true),
	)
	p, err := (&Reader{Kube: c}).Read(context.Background(), []string{"p0", "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Models[0].GitOps != "" {
		t.Errorf("a Helm release taken as GitOps: %q", p.Models[0].GitOps)
	}
	plan := Compute(p, Options{Bandwidth: Bandwidth{SourceObjectStore: 1_000_000}})
	if plan.Surge == nil || plan.Surge.Added["serving/llama"] == 0 {
		t.Errorf("surge %+v, notes %q: want llama surged", plan.Surge, plan.Notes)
	}
}
