package eviction

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkDrainAllNodes simulates draining 5,000 nodes with 50,000 pods
// under 5,000 PDBs (ten pods per PDB, spread over ten nodes).
func BenchmarkDrainAllNodes(b *testing.B) {
	const nodes, pods, perPDB = 5000, 50000, 10
	var ns []*corev1.Node
	for i := range nodes {
		ns = append(ns, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-%05d", i)}})
	}
	var ps []*corev1.Pod
	for i := range pods {
		p := mkPod(fmt.Sprintf("p-%06d", i), onNode(fmt.Sprintf("n-%05d", i%nodes)))
		p.Labels = map[string]string{"app": fmt.Sprintf("app-%05d", i/perPDB)}
		ps = append(ps, p)
	}
	var bs []*policyv1.PodDisruptionBudget
	for i := range pods / perPDB {
		pdb := mkPDB(fmt.Sprintf("app-%05d", i), int32(1+i%2), perPDB, int32(perPDB-1-i%2), perPDB, selectApp(fmt.Sprintf("app-%05d", i)))
		bs = append(bs, pdb)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		idx := NewIndex(ns, ps, bs)
		sim := Evaluator{Now: t0}.NewSimulation(idx)
		n := 0
		for _, node := range idx.Nodes() {
			n += len(sim.DrainNode(node))
		}
		if n != pods {
			b.Fatalf("%d verdicts", n)
		}
	}
}
