package skew

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

// NoInferenceRead names the GPU pools a drain step selects (not the
// control-plane nodes, not nodes without a pool label, not pools without
// GPUs) of an inventory not read for inference, and is "" once it was:
// by InferenceRead, or, in a report saved before that field, by a pool
// carrying its read.
func TestNoInferenceRead(t *testing.T) {
	const pl = "cloud.google.com/gke-nodepool"
	pools := []Pool{
		{Name: "cpu", Label: pl, GPUNodes: ptr.To(0)},
		{Name: "gpu-serve", Label: pl, GPUNodes: ptr.To(4)},
		{Name: "gpu-train", Label: pl, GPUNodes: ptr.To(8)},
		{Name: "old", Label: pl},
		{Name: "cp", Label: "node-role.kubernetes.io/control-plane", GPUNodes: ptr.To(1)},
		{Name: NoPool, GPUNodes: ptr.To(2)},
	}
	inv := Inventory{Pools: pools}
	got := NoInferenceRead(inv, "the saved report r.yaml", "LIVE")
	if !strings.HasPrefix(got, "GPU pool(s) gpu-serve, gpu-train: the saved report r.yaml holds no read of their workloads") || !strings.Contains(got, "must be planned live (LIVE) to drain paced") {
		t.Errorf("unread: %q", got)
	}
	if inv.ReadForInference() {
		t.Error("an inventory without the read reports it was read")
	}
	if w := NoInferenceRead(Inventory{Pools: pools[:1]}, "r", "LIVE"); w != "" {
		t.Errorf("no GPU pool: %q", w)
	}
	if w := NoInferenceRead(Inventory{Pools: pools, InferenceRead: true}, "r", "LIVE"); w != "" {
		t.Errorf("read: %q", w)
	}
	old := Inventory{Pools: append([]Pool{{Name: "gpu-x", Label: pl, GPUNodes: ptr.To(2), Inference: &InferencePool{Models: 1}}}, pools...)}
	if w := NoInferenceRead(old, "r", "LIVE"); w != "" || !old.ReadForInference() {
		t.Errorf("saved before InferenceRead, with a pool's read: %q", w)
	}
}
