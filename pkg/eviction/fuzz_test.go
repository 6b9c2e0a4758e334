package eviction

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// FuzzSimulation drains a node holding two pods under arbitrary
// PodDisruptionBudgets read from the cluster: PDB specs and statuses are
// whatever their writers put there (percentages like "abc%" or "500%",
// negative counts, selectors that match nothing or everything). The
// simulation must answer every pod once with a known outcome, and never
// spend more disruptions than it evicted pods.
func FuzzSimulation(f *testing.F) {
	pod := `{"metadata":{"name":"a","namespace":"ml","uid":"u-a","labels":{"app":"web"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","uid":"r","controller":true}]},"spec":{"nodeName":"gpu-1"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`
	f.Add([]byte(pod), []byte(`{"metadata":{"name":"web","namespace":"ml","generation":1},"spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"web"}}},"status":{"observedGeneration":1,"disruptionsAllowed":1,"currentHealthy":3,"desiredHealthy":2,"expectedPods":3}}`))
	f.Add([]byte(pod), []byte(`{"metadata":{"name":"web","namespace":"ml"},"spec":{"maxUnavailable":"abc%","selector":{}},"status":{"disruptionsAllowed":-4,"conditions":[{"type":"DisruptionAllowed","status":"False","reason":"SyncFailed"}]}}`))
	f.Add([]byte(pod), []byte(`{"metadata":{"name":"web","namespace":"ml","generation":5},"spec":{"maxUnavailable":"500%","unhealthyPodEvictionPolicy":"AlwaysAllow","selector":{"matchExpressions":[{"key":"app","operator":"In","values":["web"]}]}},"status":{"observedGeneration":2,"disruptionsAllowed":2147483647}}`))
	f.Add([]byte(`{"metadata":{"name":"a","namespace":"ml","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["x"],"annotations":{"karpenter.sh/do-not-disrupt":"true"}},"spec":{"nodeName":"gpu-1","terminationGracePeriodSeconds":-1,"volumes":[{"name":"s","emptyDir":{}}]},"status":{"phase":"Pending"}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, podJSON, pdbJSON []byte) {
		var a corev1.Pod
		var pdb policyv1.PodDisruptionBudget
		if json.Unmarshal(podJSON, &a) != nil || json.Unmarshal(pdbJSON, &pdb) != nil {
			return
		}
		a.Namespace, a.Spec.NodeName = "ml", "gpu-1"
		if a.Name == "" || a.Name == "b" {
			a.Name = "a"
		}
		b := a.DeepCopy()
		b.Name, b.UID = "b", a.UID+"-b"
		pdb.Namespace = "ml"
		node := &corev1.Node{}
		node.Name = "gpu-1"
		idx := NewIndex([]*corev1.Node{node}, []*corev1.Pod{&a, b}, []*policyv1.PodDisruptionBudget{&pdb})
		sim := Evaluator{Now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}.NewSimulation(idx)
		verdicts := sim.DrainNode("gpu-1")
		if len(verdicts) != 2 {
			t.Fatalf("%d verdicts for 2 pods", len(verdicts))
		}
		evicted := int32(0)
		for _, v := range verdicts {
			switch v.Outcome {
			case OutcomeNow, OutcomeIgnored, OutcomeLater, OutcomeNever, OutcomeUnknown:
			default:
				t.Fatalf("pod %s: unknown outcome %q", v.Name, v.Outcome)
			}
			for _, bl := range v.Blockers {
				if bl.Message == "" {
					t.Fatalf("pod %s: blocker %s without a message", v.Name, bl.Kind)
				}
			}
			if v.Outcome != OutcomeIgnored && v.Eviction.Evicted() {
				evicted++
			}
		}
		if spent := sim.Spent("ml", pdb.Name); spent > evicted {
			t.Fatalf("spent %d disruptions of %s for %d evictions", spent, pdb.Name, evicted)
		}
	})
}
