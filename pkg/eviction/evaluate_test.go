package eviction

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	ctrl := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name),
			Labels:          map[string]string{"app": "web", "pod-template-hash": "abc"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: "gpu-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func unready(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func pending(p *corev1.Pod) { p.Status.Phase = corev1.PodPending; unready(p) }
func noOwner(p *corev1.Pod) { p.OwnerReferences = nil }
func withEmptyDir(p *corev1.Pod) {
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
}
func daemonSet(p *corev1.Pod) {
	p.OwnerReferences[0].Kind = "DaemonSet"
	p.OwnerReferences[0].Name = "agent"
}
func mirror(p *corev1.Pod) {
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	p.OwnerReferences = nil
}
func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{DoNotDisruptAnnotation: "true"}
}
func grace(s int64) podOpt { return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s } }
func terminating(since time.Time, finalizers ...string) podOpt {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: since}
		p.Finalizers = finalizers
	}
}
func onNode(n string) podOpt   { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func label(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

type pdbOpt func(*policyv1.PodDisruptionBudget)

func mkPDB(name string, allowed, current, desired, expected int32, opts ...pdbOpt) *policyv1.PodDisruptionBudget {
	b := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(desired)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed,
			CurrentHealthy: current, DesiredHealthy: desired, ExpectedPods: expected},
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

func maxUnavailable(v intstr.IntOrString) pdbOpt {
	return func(b *policyv1.PodDisruptionBudget) { b.Spec.MinAvailable = nil; b.Spec.MaxUnavailable = &v }
}
func policy(p policyv1.UnhealthyPodEvictionPolicyType) pdbOpt {
	return func(b *policyv1.PodDisruptionBudget) { b.Spec.UnhealthyPodEvictionPolicy = &p }
}
func withSyncFailed(b *policyv1.PodDisruptionBudget) {
	b.Status.Conditions = []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.SyncFailedReason, Message: `found no controllers for pod "w-0"`}}
}
func emptySelector(b *policyv1.PodDisruptionBudget) { b.Spec.Selector = &metav1.LabelSelector{} }
func stale(b *policyv1.PodDisruptionBudget)         { b.Generation = 2 }
func selectApp(app string) pdbOpt {
	return func(b *policyv1.PodDisruptionBudget) { b.Spec.Selector.MatchLabels = map[string]string{"app": app} }
}
func unconfirmed(n int) pdbOpt {
	return func(b *policyv1.PodDisruptionBudget) {
		b.Status.DisruptedPods = map[string]metav1.Time{}
		for i := range n {
			b.Status.DisruptedPods[fmt.Sprintf("p-%d", i)] = metav1.Time{}
		}
	}
}

type want struct {
	pod      string
	outcome  Outcome
	reason   Reason
	code     int32
	blockers []BlockerKind
	spends   bool
}

func TestSimulationDrainNode(t *testing.T) {
	now := t0
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}
	tests := []struct {
		name  string
		eval  Evaluator
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		nodes []*corev1.Node
		want  []want
	}{
		{name: "no pdb", pods: []*corev1.Pod{mkPod("a")},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201}}},
		{name: "budget of one spent by the first eviction",
			pods: []*corev1.Pod{mkPod("a"), mkPod("b"), mkPod("c", onNode("gpu-2"))},
			pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 1, 3, 2, 3)},
			want: []want{
				{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201, spends: true},
				{pod: "b", outcome: OutcomeLater, reason: ReasonBudgetExhausted, code: 429, blockers: []BlockerKind{BlockerBudgetSpent}},
			}},
		{name: "minAvailable equals replicas",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonBudgetExhausted, code: 429, blockers: []BlockerKind{BlockerMinAvailableAll}}}},
		{name: "maxUnavailable zero",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3, maxUnavailable(intstr.FromInt32(0)))},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonBudgetExhausted, code: 429, blockers: []BlockerKind{BlockerMaxUnavailableZero}}}},
		{name: "maxUnavailable 0%",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3, maxUnavailable(intstr.FromString("0%")))},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonBudgetExhausted, code: 429, blockers: []BlockerKind{BlockerMaxUnavailableZero}}}},
		{name: "sync failed",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 0, 0, 0, maxUnavailable(intstr.FromInt32(1)), withSyncFailed)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonPDBSyncFailed, code: 429, blockers: []BlockerKind{BlockerSyncFailed}}}},
		{name: "sync failed before the first sync reads as stale",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 0, 0, 0, maxUnavailable(intstr.FromInt32(1)), withSyncFailed, stale)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonPDBStale, code: 429, blockers: []BlockerKind{BlockerSyncFailed}}}},
		{name: "temporarily short of healthy pods",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 2, 2, 3)},
			want: []want{{pod: "a", outcome: OutcomeLater, reason: ReasonBudgetExhausted, code: 429, blockers: []BlockerKind{BlockerBudgetExhausted}}}},
		{name: "two pdbs select the pod",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 1, 3, 2, 3), mkPDB("web2", 1, 3, 2, 3)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonMultiplePDBs, code: 500, blockers: []BlockerKind{BlockerMultiplePDBs}}}},
		{name: "empty selector adds a second pdb",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 1, 3, 2, 3), mkPDB("all", 1, 3, 2, 3, emptySelector)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonMultiplePDBs, code: 500, blockers: []BlockerKind{BlockerEmptySelector}}}},
		{name: "pdb for another app does not select the pod",
			pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("db", 0, 1, 1, 1, selectApp("db"))},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201}}},
		{name: "unready pod under AlwaysAllow spends nothing",
			pods: []*corev1.Pod{mkPod("a", unready), mkPod("b")},
			pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 1, 2, 2, 3, policy(policyv1.AlwaysAllow))},
			want: []want{
				{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201},
				// allowed is 1 here only to show that a's eviction left it for b.
				{pod: "b", outcome: OutcomeNow, reason: ReasonEvicted, code: 201, spends: true},
			}},
		{name: "unready pod under IfHealthyBudget with a healthy budget",
			pods: []*corev1.Pod{mkPod("a", unready)}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 2, 2, 3)},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201}}},
		{name: "unready pod under IfHealthyBudget with a short budget",
			pods: []*corev1.Pod{mkPod("a", unready)}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 1, 2, 3, policy(policyv1.IfHealthyBudget))},
			want: []want{{pod: "a", outcome: OutcomeLater, reason: ReasonBudgetExhausted, code: 429, blockers: []BlockerKind{BlockerUnhealthyPod}}}},
		{name: "pending pod skips the pdb",
			pods: []*corev1.Pod{mkPod("a", pending)}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3)},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201}}},
		{name: "pending pod skips even two pdbs",
			pods: []*corev1.Pod{mkPod("a", pending)}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3), mkPDB("web2", 0, 3, 3, 3)},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201}}},
		{name: "finalizers hold a terminating pod past its grace period",
			pods: []*corev1.Pod{mkPod("a", terminating(now.Add(-time.Hour), "example.com/cleanup"))},
			pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerFinalizers}}}},
		{name: "terminating within its grace period",
			pods: []*corev1.Pod{mkPod("a", terminating(now.Add(time.Minute)))},
			want: []want{{pod: "a", outcome: OutcomeLater, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerTerminating}}}},
		{name: "stale pdb", pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 1, 3, 2, 3, stale)},
			want: []want{{pod: "a", outcome: OutcomeLater, reason: ReasonPDBStale, code: 429, blockers: []BlockerKind{BlockerPDBStale}}}},
		{name: "negative disruptions allowed", pods: []*corev1.Pod{mkPod("a")}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", -1, 3, 2, 3)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonNegativeBudget, code: 403, blockers: []BlockerKind{BlockerNegativeBudget}}}},
		{name: "too many unconfirmed disruptions", pods: []*corev1.Pod{mkPod("a")},
			pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 5, 3, 2, 3, unconfirmed(MaxDisruptedPods+1))},
			want: []want{{pod: "a", outcome: OutcomeLater, reason: ReasonTooManyUnconfirmed, code: 403, blockers: []BlockerKind{BlockerTooManyUnconfirmed}}}},
		{name: "daemonset and mirror pods are ignored", pods: []*corev1.Pod{mkPod("ds", daemonSet), mkPod("static", mirror)},
			want: []want{
				{pod: "ds", outcome: OutcomeIgnored, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerDaemonSet}},
				{pod: "static", outcome: OutcomeIgnored, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerMirrorPod}},
			}},
		{name: "no controller and emptyDir block without the flags", pods: []*corev1.Pod{mkPod("a", noOwner, withEmptyDir)},
			want: []want{{pod: "a", outcome: OutcomeNever, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerNoController, BlockerEmptyDir}}}},
		{name: "--force and --delete-emptydir-data let them go", eval: Evaluator{Force: true, DeleteEmptyDirData: true},
			pods: []*corev1.Pod{mkPod("a", noOwner, withEmptyDir)},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerNoController, BlockerEmptyDir}}}},
		{name: "karpenter do-not-disrupt on pod and node", pods: []*corev1.Pod{mkPod("a", doNotDisrupt)},
			nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Annotations: map[string]string{DoNotDisruptAnnotation: "true"}}}},
			want:  []want{{pod: "a", outcome: OutcomeNever, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerDoNotDisrupt, BlockerDoNotDisrupt}}}},
		{name: "grace period longer than the drain timeout", pods: []*corev1.Pod{mkPod("a", grace(7200)), mkPod("b", grace(600))},
			want: []want{
				{pod: "a", outcome: OutcomeNever, reason: ReasonEvicted, code: 201, blockers: []BlockerKind{BlockerGracePeriod}},
				{pod: "b", outcome: OutcomeNow, reason: ReasonEvicted, code: 201},
			}},
		{name: "finished pods are deleted without a pdb", pods: []*corev1.Pod{mkPod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded; noOwner(p); withEmptyDir(p) })},
			pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3)},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201}}},
		{name: "other label set", pods: []*corev1.Pod{mkPod("a", label("app", "db"))}, pdbs: []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3)},
			want: []want{{pod: "a", outcome: OutcomeNow, reason: ReasonEvicted, code: 201}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = []*corev1.Node{node}
			}
			tc.eval.Now = now
			sim := tc.eval.NewSimulation(NewIndex(nodes, tc.pods, tc.pdbs))
			var got []want
			for _, v := range sim.DrainNode("gpu-1") {
				w := want{pod: v.Name, outcome: v.Outcome, reason: v.Eviction.Reason, code: v.Eviction.Code, spends: v.SpendsBudget}
				for _, b := range v.Blockers {
					w.blockers = append(w.blockers, b.Kind)
				}
				got = append(got, w)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerdictDetail(t *testing.T) {
	pods := []*corev1.Pod{mkPod("a"), mkPod("b"), mkPod("c")}
	sim := Evaluator{Now: t0}.NewSimulation(NewIndex(nil, pods, []*policyv1.PodDisruptionBudget{mkPDB("web", 0, 3, 3, 3)}))
	got := sim.Predict(pods[0])
	wantV := Verdict{
		Namespace: "ml", Name: "a", Node: "gpu-1", UID: "uid-a", Outcome: OutcomeNever,
		Eviction: Result{Reason: ReasonBudgetExhausted, Code: 429, PDB: "web", DesiredHealthy: ptr.To[int32](3), CurrentHealthy: ptr.To[int32](3),
			Message: "The disruption budget web needs 3 healthy pods and has 3 currently"},
		PDBs:   []string{"web"},
		Budget: &Budget{Name: "web", CurrentHealthy: 3, DesiredHealthy: 3, ExpectedPods: 3, UnhealthyPodEvictionPolicy: "IfHealthyBudget"},
		Blockers: []Blocker{{Kind: BlockerMinAvailableAll, Outcome: OutcomeNever, PDB: "web",
			Message:    "minAvailable 3 asks for all 3 pods the budget expects (desiredHealthy 3), so no pod may ever be evicted",
			Fix:        "kubectl scale deployment/web -n ml --replicas=4",
			FixWarning: `or lower minAvailable: kubectl patch pdb web -n ml --type merge -p '{"spec":{"minAvailable":2}}'`}},
	}
	if diff := cmp.Diff(wantV, got); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	// Predict spends nothing; the classification of a real refusal matches.
	if sim.Spent("ml", "web") != 0 {
		t.Error("Predict spent budget")
	}
	real := Classify(exhaustedErr("web", 3, 3))
	if real.Reason != got.Eviction.Reason || real.Message != got.Eviction.Message || *real.DesiredHealthy != *got.Eviction.DesiredHealthy {
		t.Errorf("prediction %+v differs from the classified server answer %+v", got.Eviction, real)
	}
}

func TestSimulationSpendsAcrossNodes(t *testing.T) {
	pods := []*corev1.Pod{mkPod("a"), mkPod("b", onNode("gpu-2")), mkPod("c", onNode("gpu-3"))}
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "gpu-2"}}}
	sim := Evaluator{Now: t0}.NewSimulation(NewIndex(nodes, pods, []*policyv1.PodDisruptionBudget{mkPDB("web", 1, 3, 2, 3)}))
	first := sim.DrainNode("gpu-1")
	second := sim.DrainNode("gpu-2")
	if first[0].Outcome != OutcomeNow || second[0].Outcome != OutcomeLater || second[0].Blockers[0].Kind != BlockerBudgetSpent {
		t.Errorf("first %+v second %+v", first[0], second[0])
	}
	if sim.Spent("ml", "web") != 1 {
		t.Errorf("spent = %d", sim.Spent("ml", "web"))
	}
	// Evicting the same pod twice does not spend twice.
	if v := sim.Evict(pods[0]); v.Eviction.Reason != ReasonPodGone {
		t.Errorf("second eviction of a = %+v", v.Eviction)
	}
}

// TestPredictAloneSpendsNothing: three pods under a budget that allows one
// disruption. Once the drain evicted the first, Predict answers the second
// as the drain meets it (budget spent), PredictAlone as a server-side dry
// run would (a dry run spends no budget), and neither spends.
func TestPredictAloneSpendsNothing(t *testing.T) {
	pods := []*corev1.Pod{mkPod("a"), mkPod("b"), mkPod("c")}
	sim := Evaluator{Now: t0}.NewSimulation(NewIndex(nil, pods, []*policyv1.PodDisruptionBudget{mkPDB("web", 1, 3, 2, 3)}))
	if v := sim.Evict(pods[0]); !v.Eviction.Evicted() {
		t.Fatalf("first eviction = %+v", v.Eviction)
	}
	if v := sim.Predict(pods[1]); v.Eviction.Reason != ReasonBudgetExhausted || v.Blockers[0].Kind != BlockerBudgetSpent {
		t.Errorf("Predict(b) = %+v", v)
	}
	alone := sim.PredictAlone(pods[1])
	if alone.Eviction.Reason != ReasonEvicted || alone.Outcome != OutcomeNow || alone.Budget.DisruptionsAllowed != 1 || alone.Budget.Spent != 0 {
		t.Errorf("PredictAlone(b) = %+v budget %+v", alone, alone.Budget)
	}
	if sim.Spent("ml", "web") != 1 {
		t.Errorf("spent = %d after predictions, want 1", sim.Spent("ml", "web"))
	}
}

func TestUnknownPDBs(t *testing.T) {
	idx := NewIndex(nil, []*corev1.Pod{mkPod("a")}, nil)
	idx.SetPDBsUnknown("ml", "forbidden")
	v := Evaluator{Now: t0}.NewSimulation(idx).Predict(mkPod("a"))
	if v.Outcome != OutcomeUnknown || v.Blockers[0].Kind != BlockerPDBsUnknown {
		t.Errorf("verdict = %+v", v)
	}
}

func TestCordonedSince(t *testing.T) {
	when := metav1.NewTime(t0)
	n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubelet", Time: &metav1.Time{Time: t0.Add(time.Hour)}, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
		{Manager: "kubectl-cordon", Time: &when, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:unschedulable":{}}}`)}},
	}}}
	since, ok := CordonedSince(n)
	if !ok || !since.Equal(t0) {
		t.Errorf("CordonedSince = %v, %v", since, ok)
	}
	if _, ok := CordonedSince(&corev1.Node{}); ok {
		t.Error("schedulable node reads as cordoned")
	}
}
