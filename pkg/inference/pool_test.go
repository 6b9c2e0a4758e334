package inference

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
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

func gpuSpec(gpus int64) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}
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
		return p.Last().String() == ".pdb" || p.Last().String() == ".template"
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
