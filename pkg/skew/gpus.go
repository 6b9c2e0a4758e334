package skew

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/nodepool"
)

// GPUCount is what one pool offers of one GPU resource and product.
type GPUCount struct {
	// Resource is the extended resource (nvidia.com/gpu, a MIG profile such
	// as nvidia.com/mig-1g.10gb, amd.com/gpu, gpu.intel.com/i915).
	Resource string `json:"resource"`
	// Product is the node's GPU product label, when it has one.
	Product string `json:"product,omitempty"`
	// Nodes counts the nodes offering it.
	Nodes int `json:"nodes"`
	// Allocatable sums status.allocatable over those nodes.
	Allocatable int64 `json:"allocatable"`
}

// GPUProductLabels are the node labels that name the GPU model, in the
// order they are tried (package nodepool holds the list and its sources).
var GPUProductLabels = nodepool.GPUProductLabels

// IsGPUResource reports whether an extended resource is a GPU: NVIDIA's
// device plugin resources (nvidia.com/gpu, nvidia.com/gpu.shared when
// time-slicing renames it, nvidia.com/mig-<profile> under the mixed MIG
// strategy), AMD's amd.com/gpu and Intel's gpu.intel.com/<driver>.
func IsGPUResource(name corev1.ResourceName) bool {
	s := string(name)
	return s == "nvidia.com/gpu" || s == "nvidia.com/gpu.shared" || strings.HasPrefix(s, "nvidia.com/mig-") ||
		s == "amd.com/gpu" || strings.HasPrefix(s, "gpu.intel.com/")
}

// GPUProduct returns the GPU model a node's labels name, or "".
func GPUProduct(labels map[string]string) string { return nodepool.GPUProduct(labels) }

type gpuKey struct{ resource, product string }

// countGPUs adds a node's allocatable GPUs to a pool's counts.
func countGPUs(acc map[gpuKey]*GPUCount, n *corev1.Node) {
	var product string
	for name, q := range n.Status.Allocatable {
		if !IsGPUResource(name) || q.Sign() <= 0 {
			continue
		}
		if product == "" {
			product = GPUProduct(n.Labels)
		}
		k := gpuKey{string(name), product}
		c := acc[k]
		if c == nil {
			c = &GPUCount{Resource: k.resource, Product: k.product}
			acc[k] = c
		}
		c.Nodes++
		c.Allocatable += q.Value()
	}
}

// sortedGPUs returns a pool's counts by resource, then product.
func sortedGPUs(acc map[gpuKey]*GPUCount) []GPUCount {
	var out []GPUCount
	for _, c := range acc {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Resource != out[j].Resource {
			return out[i].Resource < out[j].Resource
		}
		return out[i].Product < out[j].Product
	})
	return out
}
