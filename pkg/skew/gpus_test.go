package skew

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

func gpuNode(name, pool string, labels map[string]string, alloc map[string]string) *corev1.Node {
	l := map[string]string{"cloud.google.com/gke-nodepool": pool}
	for k, v := range labels {
		l[k] = v
	}
	n := node(name, l, "v1.37.2")
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96")}
	for r, q := range alloc {
		n.Status.Allocatable[corev1.ResourceName(r)] = resource.MustParse(q)
	}
	return n
}

func TestCollectGPUs(t *testing.T) {
	h100 := map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
	objs := []runtime.Object{
		gpuNode("a-0", "train", h100, map[string]string{"nvidia.com/gpu": "8"}),
		gpuNode("a-1", "train", h100, map[string]string{"nvidia.com/gpu": "7"}),
		// MIG under the mixed strategy: two profiles on one node.
		gpuNode("m-0", "infer", h100, map[string]string{"nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "2"}),
		gpuNode("r-0", "rocm", map[string]string{"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}, map[string]string{"amd.com/gpu": "8"}),
		// A GPU node without a product label, one with none left, a CPU node.
		gpuNode("g-0", "gke", map[string]string{"cloud.google.com/gke-accelerator": "nvidia-l4"}, map[string]string{"nvidia.com/gpu": "1"}),
		gpuNode("x-0", "bare", nil, map[string]string{"nvidia.com/gpu": "4", "example.com/fpga": "1"}),
		gpuNode("z-0", "bare", nil, map[string]string{"nvidia.com/gpu": "0"}),
		gpuNode("c-0", "cpu", nil, nil),
	}
	c := &Collector{Client: fakeClient("v1.37.2", objs...), CountGPUs: true, Now: func() time.Time { return t0 }}
	inv, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]GPUCount{}
	for _, p := range inv.Pools {
		got[p.Name] = p.GPUs
	}
	want := map[string][]GPUCount{
		"train": {{Resource: "nvidia.com/gpu", Product: "NVIDIA-H100-80GB-HBM3", Nodes: 2, Allocatable: 15}},
		"infer": {{Resource: "nvidia.com/mig-1g.10gb", Product: "NVIDIA-H100-80GB-HBM3", Nodes: 1, Allocatable: 14},
			{Resource: "nvidia.com/mig-3g.40gb", Product: "NVIDIA-H100-80GB-HBM3", Nodes: 1, Allocatable: 2}},
		"rocm": {{Resource: "amd.com/gpu", Product: "AMD_Instinct_MI300X_OAM", Nodes: 1, Allocatable: 8}},
		"gke":  {{Resource: "nvidia.com/gpu", Product: "nvidia-l4", Nodes: 1, Allocatable: 1}},
		"bare": {{Resource: "nvidia.com/gpu", Nodes: 1, Allocatable: 4}},
		"cpu":  nil,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GPUs per pool (-want +got):\n%s", d)
	}
	// Off by default: saved reports keep their shape.
	c = &Collector{Client: fakeClient("v1.37.2", objs...), Now: func() time.Time { return t0 }}
	if inv, err = c.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range inv.Pools {
		if p.GPUs != nil {
			t.Errorf("pool %s: GPUs counted without CountGPUs: %+v", p.Name, p.GPUs)
		}
	}
}
