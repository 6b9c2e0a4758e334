package inference

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// placementPool reads a pool of nodes p0 and p1 serving model llama (two
// replicas of 1 GPU on p0, each scheduled with the rule set on its pod
// spec) behind a PodDisruptionBudget of minAvailable 1, with one free
// node outside the pool (spare-0, 8 free GPUs): room for every replica
// by GPUs alone.
func placementPool(t *testing.T, rule func(*corev1.PodSpec), extra ...func(*appsv1.ReplicaSet) runtime.Object) *Pool {
	t.Helper()
	d, rs := servingDeployment("llama", 2, 1, map[string]string{AnnWeightsBytes: "4M"})
	rule(&d.Spec.Template.Spec)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llama"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llama"}}}}
	objs := []runtime.Object{d, rs, pdb}
	for _, n := range []string{"p0", "p1", "spare-0"} {
		node := gpuNode(n, h100, 8, false, nil)
		node.Labels[corev1.LabelHostname] = n
		objs = append(objs, node)
	}
	for _, name := range []string{"llama-0", "llama-1"} {
		p := servingPod(rs, name, "p0", 1, true)
		rule(&p.Spec)
		objs = append(objs, p)
	}
	for _, e := range extra {
		objs = append(objs, e(rs))
	}
	pool, err := (&Reader{Kube: fake.NewClientset(objs...)}).Read(context.Background(), []string{"p0", "p1"})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func antiAffinityOnHost(s *corev1.PodSpec) {
	s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llama"}}}}}}
}

func spreadOverHosts(s *corev1.PodSpec) {
	s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llama"}}}}
}

// A replica whose required anti-affinity keeps it one per node finds one
// place on the free node, not eight: no surge (its one place is a
// displaced replica's), and the second displaced replica stays Pending,
// which the plan says and ties to the rule.
func TestComputeHonoursRequiredAntiAffinity(t *testing.T) {
	plan := Compute(placementPool(t, antiAffinityOnHost), Options{Bandwidth: bw})
	if plan.Surge != nil {
		t.Errorf("surge %+v: the free node has room for one replica of llama, which a displaced one needs", plan.Surge.Added)
	}
	var unplaced int32
	for _, w := range plan.Waves {
		unplaced += w.Unplaced["serving/llama"]
	}
	if unplaced != 1 {
		t.Errorf("replicas left without a place: %d, want 1 (waves %+v)", unplaced, plan.Waves)
	}
	if notes := strings.Join(plan.Notes, "\n"); !strings.Contains(notes, "1 replica of serving/llama finds no free GPU outside the pool and stays Pending until the pool is back; its required pod anti-affinity (topologyKey kubernetes.io/hostname) keeps replicas off free GPUs outside the pool") {
		t.Errorf("notes:\n%s", notes)
	}
}

// A DoNotSchedule spread over hosts of maxSkew 1 counts the pool's
// drained nodes as domains of none: the free node takes one replica, and
// a --min-serving of every replica is refused with the rule as the reason,
// where GPUs alone would let both replicas and a surge land there.
func TestComputeHonoursTopologySpread(t *testing.T) {
	plan := Compute(placementPool(t, spreadOverHosts), Options{Bandwidth: bw, MinServing: 1})
	if plan.Surge != nil {
		t.Errorf("surge %+v: the spread lets the free node take one replica", plan.Surge.Added)
	}
	refusals := strings.Join(plan.Refusals, "\n")
	if !strings.Contains(refusals, "its topology spread constraint (topologyKey kubernetes.io/hostname, maxSkew 1, DoNotSchedule) keeps replicas off free GPUs outside the pool") {
		t.Errorf("refusals:\n%s", refusals)
	}
	// ScheduleAnyway is not a filter: the plan places as by GPUs.
	plan = Compute(placementPool(t, func(s *corev1.PodSpec) {
		spreadOverHosts(s)
		s.TopologySpreadConstraints[0].WhenUnsatisfiable = corev1.ScheduleAnyway
	}), Options{Bandwidth: bw, MinServing: 1})
	if plan.Refused() || plan.Surge == nil || plan.Surge.Added["serving/llama"] != 2 {
		t.Errorf("ScheduleAnyway: refusals %q, surge %+v", plan.Refusals, plan.Surge)
	}
}

// A terminating replica on the free node still counts for a required
// anti-affinity term until it is gone (the scheduler's
// AffinityTerm.Matches has no deletion check): the free node takes no
// replica, where a spread constraint would leave the terminating pod out.
func TestComputeAntiAffinityCountsTerminatingPods(t *testing.T) {
	pool := placementPool(t, antiAffinityOnHost, func(rs *appsv1.ReplicaSet) runtime.Object {
		p := servingPod(rs, "llama-old", "spare-0", 1, false)
		antiAffinityOnHost(&p.Spec)
		p.DeletionTimestamp = &metav1.Time{}
		p.Finalizers = []string{"example.com/hold"}
		return p
	})
	plan := Compute(pool, Options{Bandwidth: bw})
	var unplaced int32
	for _, w := range plan.Waves {
		unplaced += w.Unplaced["serving/llama"]
	}
	if unplaced != 2 {
		t.Errorf("replicas left without a place: %d, want 2: the terminating replica on spare-0 keeps both off it (waves %+v)", unplaced, plan.Waves)
	}
}
