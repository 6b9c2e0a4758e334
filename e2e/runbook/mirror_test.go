//go:build e2e

package runbooke2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestMirrorResetNodeStaysUnknown holds a node that kubeadm reset
// stopped at Ready Unknown against KWOK, which plays the nodes' kubelets
// and sets a managed node's Ready back to True at once (its
// node-initialize Stage), so that a kubectl wait for Ready=Unknown pasted
// after the reset sees it; and, joined again, hands the node back to
// KWOK, whose Stage then answers for its Ready condition again.
func TestMirrorResetNodeStaysUnknown(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := NewWorld("kubeadm", "mixed-pools")
	m := &Mirror{Client: cp.Client, World: w, Name: "mirror-reset"}
	if err := m.Create(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		_ = m.Delete(dctx)
	}()
	var node *Node
	for _, p := range w.Pools {
		if !p.ControlPlane && len(p.Nodes) > 0 {
			node = p.Nodes[0]
			break
		}
	}
	if node == nil {
		t.Fatal("no worker node in the world")
	}
	get := func() *corev1.Node {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	w.Lock()
	node.Host.Reset = true
	w.Unlock()
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// KWOK's node-initialize Stage has no delay: a node it still managed
	// would be back at True well within these seconds.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if st := readyStatus(get()); st != corev1.ConditionUnknown {
			t.Fatalf("%s after kubeadm reset: Ready %q, want Unknown until it joins again", node.Name, st)
		}
	}

	w.Lock()
	node.Host.Reset = false
	w.Unlock()
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := get(); readyStatus(n) != corev1.ConditionTrue || n.Annotations[kwokNode] != "fake" {
		t.Fatalf("%s joined again: Ready %q, %s=%q, want True and KWOK's", node.Name, readyStatus(n), kwokNode, n.Annotations[kwokNode])
	}
	// KWOK manages it again: a Ready that is not True is set True by its
	// Stage, not by the lane.
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{"type": "Ready", "status": "False", "reason": "Test"}}}})
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := wait(ctx, node.Name+" Ready again by KWOK", func(context.Context) (bool, error) {
		return readyStatus(get()) == corev1.ConditionTrue, nil
	}); err != nil {
		t.Fatal(err)
	}
}
