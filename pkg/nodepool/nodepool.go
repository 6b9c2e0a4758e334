// Package nodepool names a node's pool from its labels: one list of the
// well-known pool labels, shared by every plugin, so that kubectl skew,
// kubectl skew preflight and kubectl gpu-validate give a node the same
// pool name.
package nodepool

// Labels are the well-known node labels that name a node pool, in the
// order they are tried: GKE, EKS managed node groups, eksctl, AKS (the
// current label and the older one), Karpenter (v1 and the older
// provisioner label) and Cluster API (MachineDeployment, then MachineSet).
var Labels = []string{
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"alpha.eksctl.io/nodegroup-name",
	"kubernetes.azure.com/agentpool",
	"agentpool",
	"karpenter.sh/nodepool",
	"karpenter.sh/provisioner-name",
	"cluster.x-k8s.io/deployment-name",
	"cluster.x-k8s.io/set-name",
}

// Name returns the pool a node's labels name and the label that named it:
// with label set only that label is read, otherwise the first of Labels
// the node carries. Both are "" when none names a pool.
func Name(labels map[string]string, label string) (name, from string) {
	if label != "" {
		if v := labels[label]; v != "" {
			return v, label
		}
		return "", ""
	}
	for _, l := range Labels {
		if v := labels[l]; v != "" {
			return v, l
		}
	}
	return "", ""
}
