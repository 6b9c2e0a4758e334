//go:build e2e

package pdbblockerse2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

func i(v int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(v)) }

// expected is what the plugin must predict for the pods of one app.
type expected struct {
	verdict eviction.Outcome
	reason  eviction.Reason
	blocker eviction.BlockerKind // the first blocker's kind, "" for none
}

// TestPDBBlockersVerdictsMatchEvictions builds one node with every kind of
// pod the plugin knows about, asks the plugin what a drain of the node
// would meet, then evicts every pod for real in the plugin's drain order
// and checks each answer of the API server against the prediction.
func TestPDBBlockersVerdictsMatchEvictions(t *testing.T) {
	e := newEnv(t, 1, 10*time.Minute)
	node := e.nodes[0]

	// No budget: evicts now.
	e.deploy("free", 1, node, nil)
	// minAvailable equal to the replica count: never.
	e.deploy("strict", 2, node, nil)
	e.pdb("strict", "strict", i(2), nil, "", 2)
	// maxUnavailable 0: never.
	e.deploy("zero", 1, node, nil)
	e.pdb("zero", "zero", nil, i(0), "", 1)
	// One disruption allowed, two pods on the node: the first evicts now, the
	// second waits for the first one's replacement, which cannot run on the
	// cordoned node.
	e.deploy("budget", 2, node, nil)
	e.pdb("budget", "budget", i(1), nil, "", 2)
	// Two PDBs select the pod: the API answers 500.
	e.deploy("multi", 1, node, nil)
	e.pdb("multi-a", "multi", i(0), nil, "", 1)
	e.pdb("multi-b", "multi", i(0), nil, "", 1)
	// AlwaysAllow lets the unready pod go although the budget is spent.
	e.deploy("always", 2, node, nil)
	e.pdb("always", "always", i(2), nil, policyv1.AlwaysAllow, 2)
	// IfHealthyBudget with enough healthy pods lets the unready pod go.
	e.deploy("ifhealthy", 3, node, nil)
	e.pdb("ifhealthy", "ifhealthy", i(2), nil, policyv1.IfHealthyBudget, 3)
	// IfHealthyBudget short of healthy pods guards the unready pods.
	e.deploy("guarded", 3, node, nil)
	e.pdb("guarded", "guarded", i(2), nil, "", 3)
	// Karpenter's do-not-disrupt: the API evicts, Karpenter never would.
	e.deploy("pinned", 1, node, map[string]string{eviction.DoNotDisruptAnnotation: "true"})
	// A DaemonSet pod: drain ignores it.
	e.daemonSet("agent", node)
	// Pods owned by a custom resource without /scale under a maxUnavailable
	// PDB: the disruption controller fails to sync. "trainer" synced once
	// (before its pods existed), so the API names the failed sync; "fresh"
	// never synced, so the API keeps answering "still being processed".
	owner := e.trainer("trainer")
	e.pdb("trainer", "trainer", nil, i(1), "", 0)
	fresh := e.trainer("fresh")
	for _, n := range []string{"trainer-0", "trainer-1", "fresh-0"} {
		app, ref := "trainer", owner
		if strings.HasPrefix(n, "fresh") {
			app, ref = "fresh", fresh
		}
		e.pod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"app": app},
			OwnerReferences: []metav1.OwnerReference{ref}}}, node)
	}
	freshPDB := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: e.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: i(1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fresh"}}}}
	if _, err := e.cp.Client.PolicyV1().PodDisruptionBudgets(e.ns).Create(e.ctx, freshPDB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod without a controller, with emptyDir data.
	lonely := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Labels: map[string]string{"app": "lonely"}}}
	lonely.Spec = harnessSpecWithEmptyDir()
	e.pod(lonely, node)
	// A terminating pod held by a finalizer.
	fin := e.pod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "finalized", Labels: map[string]string{"app": "finalized"},
		Finalizers: []string{"e2e.gpufleet.dev/hold"}}}, node)
	t.Cleanup(func() {
		_, _ = e.cp.Client.CoreV1().Pods(e.ns).Patch(t.Context(), fin.Name, types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	})
	if err := e.cp.Client.CoreV1().Pods(e.ns).Delete(e.ctx, fin.Name, metav1.DeleteOptions{}); err != nil {
		e.fatal("delete finalized: %v", err)
	}

	e.waitApps()
	// Make pods unready and wait for the disruption controller to see it.
	always, ifh, guarded := e.podsOf("always"), e.podsOf("ifhealthy"), e.podsOf("guarded")
	unready := map[string]bool{always[0].Name: true, ifh[0].Name: true, guarded[0].Name: true, guarded[1].Name: true}
	for n := range unready {
		e.markUnready(n)
	}
	e.waitPDB("always", func(b *policyv1.PodDisruptionBudget) bool { return b.Status.CurrentHealthy == 1 })
	e.waitPDB("ifhealthy", func(b *policyv1.PodDisruptionBudget) bool {
		return b.Status.CurrentHealthy == 2 && b.Status.DisruptionsAllowed == 0
	})
	e.waitPDB("guarded", func(b *policyv1.PodDisruptionBudget) bool { return b.Status.CurrentHealthy == 1 })
	failed := func(b *policyv1.PodDisruptionBudget) bool {
		c := apimeta.FindStatusCondition(b.Status.Conditions, policyv1.DisruptionAllowedCondition)
		return c != nil && c.Reason == policyv1.SyncFailedReason
	}
	e.waitPDB("trainer", failed)
	e.waitPDBStatus("fresh", failed)
	e.settle()

	// The drain has started: the node is cordoned, so replacements stay Pending.
	e.cordon(node)

	want := map[string]expected{
		"free":      {eviction.OutcomeNow, eviction.ReasonEvicted, ""},
		"strict":    {eviction.OutcomeNever, eviction.ReasonBudgetExhausted, eviction.BlockerMinAvailableAll},
		"zero":      {eviction.OutcomeNever, eviction.ReasonBudgetExhausted, eviction.BlockerMaxUnavailableZero},
		"multi":     {eviction.OutcomeNever, eviction.ReasonMultiplePDBs, eviction.BlockerMultiplePDBs},
		"pinned":    {eviction.OutcomeNever, eviction.ReasonEvicted, eviction.BlockerDoNotDisrupt},
		"agent":     {eviction.OutcomeIgnored, eviction.ReasonEvicted, eviction.BlockerDaemonSet},
		"trainer":   {eviction.OutcomeNever, eviction.ReasonPDBSyncFailed, eviction.BlockerSyncFailed},
		"fresh":     {eviction.OutcomeNever, eviction.ReasonPDBStale, eviction.BlockerSyncFailed},
		"lonely":    {eviction.OutcomeNever, eviction.ReasonEvicted, eviction.BlockerNoController},
		"finalized": {eviction.OutcomeNever, eviction.ReasonEvicted, eviction.BlockerNoController},
	}
	budget := e.podsOf("budget")
	want["budget/"+budget[0].Name] = expected{eviction.OutcomeNow, eviction.ReasonEvicted, ""}
	want["budget/"+budget[1].Name] = expected{eviction.OutcomeLater, eviction.ReasonBudgetExhausted, eviction.BlockerBudgetSpent}
	for _, p := range always {
		if unready[p.Name] {
			want["always/"+p.Name] = expected{eviction.OutcomeNow, eviction.ReasonEvicted, ""}
		} else {
			want["always/"+p.Name] = expected{eviction.OutcomeNever, eviction.ReasonBudgetExhausted, eviction.BlockerMinAvailableAll}
		}
	}
	for _, p := range ifh {
		if unready[p.Name] {
			want["ifhealthy/"+p.Name] = expected{eviction.OutcomeNow, eviction.ReasonEvicted, ""}
		} else {
			want["ifhealthy/"+p.Name] = expected{eviction.OutcomeLater, eviction.ReasonBudgetExhausted, eviction.BlockerBudgetExhausted}
		}
	}
	for _, p := range guarded {
		if unready[p.Name] {
			want["guarded/"+p.Name] = expected{eviction.OutcomeLater, eviction.ReasonBudgetExhausted, eviction.BlockerUnhealthyPod}
		} else {
			want["guarded/"+p.Name] = expected{eviction.OutcomeLater, eviction.ReasonBudgetExhausted, eviction.BlockerBudgetExhausted}
		}
	}

	rep, res := e.report(node, "--all-pods", "--server-dry-run")
	if res.ExitCode != 1 {
		t.Fatalf("exit code %d, want 1\n%s", res.ExitCode, res)
	}
	if len(rep.Nodes) != 1 || !rep.Nodes[0].Cordoned || rep.Nodes[0].CordonedSince == nil {
		t.Errorf("the drain in progress is not reported: %+v", rep.Nodes)
	}
	pods := map[string]*corev1.Pod{}
	l, err := e.cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		pods[l.Items[i].Name] = &l.Items[i]
	}
	seen := 0
	for _, it := range rep.Items {
		if it.Namespace != e.ns {
			continue
		}
		seen++
		app := pods[it.Name].Labels["app"]
		w, ok := want[app+"/"+it.Name]
		if !ok {
			w, ok = want[app]
		}
		if !ok {
			t.Errorf("pod %s (app %s) has no expectation", it.Name, app)
			continue
		}
		got := expected{verdict: it.Verdict, reason: it.Eviction.Reason}
		if len(it.Blockers) > 0 {
			got.blocker = it.Blockers[0].Kind
		}
		if got != w {
			t.Errorf("pod %s (%s): predicted %+v, want %+v\n%+v", it.Name, app, got, w, it.Blockers)
		}
		if it.Severity.String() != map[eviction.Outcome]string{eviction.OutcomeNever: "blocking", eviction.OutcomeLater: "warning"}[it.Verdict] &&
			it.Verdict != eviction.OutcomeNow && it.Verdict != eviction.OutcomeIgnored {
			t.Errorf("pod %s: severity %s for verdict %s", it.Name, it.Severity, it.Verdict)
		}
		if (it.Verdict == eviction.OutcomeNever || it.Verdict == eviction.OutcomeLater) && it.BlockingSince == nil {
			t.Errorf("pod %s blocks a drain in progress but has no blockingSince", it.Name)
		}
		for _, b := range it.Blockers {
			if b.Outcome == eviction.OutcomeNever && b.Fix == "" {
				t.Errorf("pod %s: blocker %s has no fix", it.Name, b.Kind)
			}
		}
		if it.DryRun != nil && !it.DryRun.Agrees {
			t.Errorf("pod %s: server dry run answered %s (%d %s), prediction %s", it.Name, it.DryRun.Result.Reason,
				it.DryRun.Result.Code, it.DryRun.Result.Message, it.Eviction.Reason)
		}
	}
	if seen != len(pods) {
		t.Errorf("report lists %d of the %d pods", seen, len(pods))
	}
	if rep.Summary.DryRuns < 8 {
		t.Errorf("only %d server dry runs", rep.Summary.DryRuns)
	}
	if t.Failed() {
		t.Fatalf("predictions are wrong; not evicting\n%s", res.Stdout)
	}

	// Now evict every pod for real, in the plugin's drain order, and compare.
	h := eviction.NewHelper(e.cp.Client)
	for _, it := range rep.Items {
		if it.Namespace != e.ns {
			continue
		}
		got := h.EvictOnce(e.ctx, pods[it.Name])
		if got.Reason != it.Eviction.Reason || got.Code != it.Eviction.Code {
			t.Errorf("eviction of %s: server answered %d %s (%s), plugin predicted %d %s (%s)", it.Name,
				got.Code, got.Reason, got.Message, it.Eviction.Code, it.Eviction.Reason, it.Eviction.Message)
			continue
		}
		if it.Eviction.DesiredHealthy != nil && (got.DesiredHealthy == nil || *got.DesiredHealthy != *it.Eviction.DesiredHealthy ||
			*got.CurrentHealthy != *it.Eviction.CurrentHealthy) {
			t.Errorf("eviction of %s: server said %q, plugin predicted %q", it.Name, got.Message, it.Eviction.Message)
		}
		if got.Evicted() && len(it.PDBs) == 1 {
			// Let the disruption controller confirm the eviction, so the next
			// refusal carries the recomputed numbers the plugin predicted.
			e.waitPDB(it.PDBs[0], func(b *policyv1.PodDisruptionBudget) bool { return len(b.Status.DisruptedPods) == 0 })
		}
	}

	// The table names each blocker with its fix.
	tab := plugintest.Run(t, bin, "--kubeconfig", e.cp.Kubeconfig, node, "--color", "never")
	for _, s := range []string{"BLOCKED", "WAIT", "kubectl delete pdb", "unhealthyPodEvictionPolicy", "Drain in progress on " + node} {
		if !strings.Contains(tab.Stdout+tab.Stderr, s) {
			t.Errorf("table output lacks %q\n%s", s, tab)
		}
	}
}

func harnessSpecWithEmptyDir() corev1.PodSpec {
	s := harnessPodSpec()
	s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return s
}
