package fleetrun

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakekube "k8s.io/client-go/kubernetes/fake"

	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// TestPlanControlPlanePoolSelector: the control-plane nodes' role label has
// an empty value, so their pool steps select by the label alone (an
// exists-selector), and by node-role.kubernetes.io/master where only that
// label is set; each step names the pool's node count.
func TestPlanControlPlanePoolSelector(t *testing.T) {
	for _, label := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"} {
		t.Run(label, func(t *testing.T) {
			f := loadFleet(t, nil)
			in := infos(f, nil)
			inv := inventory("v1.38.1", "gpu-a", "v1.35.4")
			one := 0
			inv.Pools = append(inv.Pools, pkgskew.Pool{Name: "control-plane", Label: label, Nodes: 3,
				Versions: []pkgskew.VersionCount{{Version: "v1.35.4", Nodes: 3}}, GPUNodes: &one})
			in["canary-a"] = ClusterInfo{Inventory: inv, GPUs: 64}
			p := mustPlan(t, f, in, monday0930)
			c, _ := p.Cluster("canary-a")
			n := 0
			for _, s := range c.Steps {
				if s.Pool != "control-plane" {
					continue
				}
				n++
				if s.Selector != label || s.Nodes != 3 {
					t.Errorf("step %s: selector %q, nodes %d; want %q and 3", s.Name, s.Selector, s.Nodes, label)
				}
			}
			if n == 0 {
				t.Fatalf("no control-plane pool step in %v", c.Steps)
			}
		})
	}
}

// TestStepOverNoNodeFails: a drain, a validation and a pool check whose
// selector matches no node (the pool was relabelled after the plan) fail
// with the selector in the message; nothing runs over the empty set.
func TestStepOverNoNodeFails(t *testing.T) {
	ctx := context.Background()
	relabel := func(t *testing.T, k *fakekube.Clientset) {
		t.Helper()
		nodes, _ := k.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			n.Labels = map[string]string{"cloud.google.com/gke-nodepool": "gpu-a-new"}
			if _, err := k.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, step := range []string{"pool-gpu-a-1-38-pdb-blockers", "pool-gpu-a-1-38-drain", "pool-gpu-a-1-38-upgrade", "pool-gpu-a-1-38-gpu-validate"} {
		t.Run(step, func(t *testing.T) {
			h := newHarness(t, nil)
			c, _ := h.p.Plan.Cluster("canary-a")
			for _, s := range c.Steps {
				if s.Name == step {
					break
				}
				if r := h.step(t, "canary-a", s.Name); r.ExitCode != 0 {
					t.Fatalf("%s: %+v", s.Name, r)
				}
			}
			relabel(t, h.kube["canary-a"])
			n := len(h.exec.calls)
			r := h.step(t, "canary-a", step)
			if r.ExitCode == 0 || r.Phase != PhaseFailed || !strings.Contains(r.Message, "selector cloud.google.com/gke-nodepool=gpu-a of pool gpu-a matches no node (the plan counted 4)") {
				t.Fatalf("%s over no node: %+v", step, r)
			}
			if step != "pool-gpu-a-1-38-upgrade" && len(h.exec.calls) != n {
				t.Errorf("ran %v over no node", h.exec.commands()[n:])
			}
		})
	}
}
