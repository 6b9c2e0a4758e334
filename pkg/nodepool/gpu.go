package nodepool

// GPUProductLabels are the node labels that name the GPU model, tried in
// this order: NVIDIA GPU feature discovery
// (NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md,
// nvidia.com/gpu.product), AMD's node labeller
// (ROCm/k8s-device-plugin cmd/k8s-node-labeller, amd.com/gpu.product-name)
// and GKE's accelerator label (cloud.google.com/gke-accelerator). They
// live here, beside the pool labels, so that a package kubectl skew
// imports (pkg/inference, whose pools the runbook classifies) reads a
// node's product without importing pkg/skew back.
var GPUProductLabels = []string{"nvidia.com/gpu.product", "amd.com/gpu.product-name", "cloud.google.com/gke-accelerator"}

// GPUProduct returns the GPU model a node's labels name, or "".
func GPUProduct(labels map[string]string) string {
	for _, l := range GPUProductLabels {
		if v := labels[l]; v != "" {
			return v
		}
	}
	return ""
}
