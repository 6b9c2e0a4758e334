package runbooke2e

import (
	"fmt"
	"sort"
)

// Providers are the providers whose runbooks the lane runs, as
// kubectl skew plan --provider names them.
var Providers = []string{"kubeadm", "eks", "gke", "aks", "capi", "k3s", "rke2"}

// Variants are the inventories every provider's runbook is run on.
var Variants = []string{"skip-level", "mixed-pools", "gpu-pools", "unknown-os", "unknown-addons"}

// OS images of the nodes. The plan reads the package manager of a kubeadm
// node from them (apt on Debian and Ubuntu, dnf on the RHEL family); an
// image it does not know gets both.
const (
	osUbuntu  = "Ubuntu 24.04.1 LTS"
	osRocky   = "Rocky Linux 9.5 (Blue Onyx)"
	osUnknown = "Flatcar Container Linux by Kinvolk 4152.2.0 (Oklo)"
	osAL2023  = "Amazon Linux 2023.6.20250107"
	osCOS     = "Container-Optimized OS from Google"
	osAKS     = "Ubuntu 22.04.5 LTS"
)

// cliqueLabel is the fabric label of the GPU pools that have units.
const cliqueLabel = "nvidia.com/gpu.clique"

// poolSpec is a pool of a variant before a provider names it.
type poolSpec struct {
	name    string
	nodes   int
	version string // full kubelet version
	gpus    int
	units   bool
	os      string // "" for the provider's usual image
}

// variant is an inventory without its provider.
type variant struct {
	controlPlane string
	cpNodes      int
	pools        []poolSpec
	// selfManagedAddons: the EKS add-ons are installed by hand.
	selfManagedAddons bool
	// hiddenAddons: kube-system shows no add-on workloads.
	hiddenAddons bool
	// etcd: k3s servers run an embedded etcd.
	etcd bool
}

func variantSpec(name string) variant {
	switch name {
	case "skip-level":
		// Three hops with the nodes left behind: every pool jumps once.
		return variant{controlPlane: Patch("1.35"), cpNodes: 1, etcd: true, pools: []poolSpec{
			{name: "gpu", nodes: 2, version: Patch("1.35"), gpus: 8, units: true},
			{name: "cpu", nodes: 2, version: Patch("1.34")},
		}}
	case "mixed-pools":
		// Pools at three minors, GPU and CPU, an HA control plane, the
		// EKS add-ons self-managed, and (kubeadm) a dnf pool beside apt ones.
		return variant{controlPlane: Patch("1.37"), cpNodes: 2, selfManagedAddons: true, pools: []poolSpec{
			{name: "gpu-a", nodes: 2, version: Patch("1.37"), gpus: 8},
			{name: "gpu-b", nodes: 2, version: Patch("1.35"), gpus: 8, os: osRocky},
			{name: "cpu", nodes: 2, version: Patch("1.36")},
		}}
	case "gpu-pools":
		// Two GPU pools, one split into fabric units, one in batches.
		return variant{controlPlane: Patch("1.37"), cpNodes: 1, etcd: true, pools: []poolSpec{
			{name: "train", nodes: 2, version: Patch("1.37"), gpus: 8, units: true},
			{name: "serve", nodes: 2, version: Patch("1.37"), gpus: 8},
		}}
	case "unknown-os":
		// Nodes whose OS image tells no package manager.
		return variant{controlPlane: Patch("1.36"), cpNodes: 1, pools: []poolSpec{
			{name: "gpu", nodes: 2, version: Patch("1.36"), gpus: 8, os: osUnknown},
			{name: "cpu", nodes: 2, version: Patch("1.36"), os: osUnknown},
		}}
	case "unknown-addons":
		// kube-system shows no add-on workloads: who manages them is unknown.
		return variant{controlPlane: Patch("1.37"), cpNodes: 1, hiddenAddons: true, pools: []poolSpec{
			{name: "gpu", nodes: 2, version: Patch("1.37"), gpus: 8},
			{name: "cpu", nodes: 2, version: Patch("1.37")},
		}}
	}
	panic("unknown variant " + name)
}

// eksAddons are the add-ons EKS manages on a cluster that installed them
// as EKS add-ons (https://docs.aws.amazon.com/eks/latest/userguide/eks-add-ons.html).
var eksAddons = []string{"vpc-cni", "kube-proxy", "coredns"}

// NewWorld builds the world of one provider and variant.
func NewWorld(provider, variantName string) *World {
	v := variantSpec(variantName)
	w := &World{Provider: provider, ControlPlane: v.controlPlane, AddonWorkloads: !v.hiddenAddons}
	label := "gpufleet.dev/pool"
	osImage := osUbuntu
	switch provider {
	case "eks":
		w.Cluster, w.Region = "train-prod", "us-west-2"
		label, osImage = "eks.amazonaws.com/nodegroup", osAL2023
		if !v.selfManagedAddons {
			w.Addons = map[string]string{}
			for _, a := range eksAddons {
				w.Addons[a] = eksAddonVersion(a, Minor(v.controlPlane))
			}
		}
	case "gke":
		w.Cluster, w.Location, w.Project = "inf-use1", "us-central1", "ml-train-prod"
		label, osImage = "cloud.google.com/gke-nodepool", osCOS
		w.Exclusions = map[string]Exclusion{}
	case "aks":
		w.Cluster, w.ResourceGroup, w.Region = "aks-train", "rg-train", "eastus"
		w.Subscription = "6f1c2d3e-0000-4000-8000-000000000001"
		label, osImage = "kubernetes.azure.com/agentpool", osAKS
	case "capi":
		w.Cluster, w.Namespace = "gpu-train-07", "fleet"
		label = "cluster.x-k8s.io/deployment-name"
		w.Topology = "v" + v.controlPlane
	case "k3s", "rke2", "kubeadm":
	default:
		panic("unknown provider " + provider)
	}
	// A Cluster API workload cluster's control plane is KubeadmControlPlane's
	// machines: kubeadm nodes, with kubeadm's static pods, whose nodes the
	// workload cluster shows as the self-hosted ones do.
	selfHosted := provider == "kubeadm" || provider == "k3s" || provider == "rke2" || provider == "capi"
	if selfHosted {
		cp := &Pool{Name: "control-plane", Label: "node-role.kubernetes.io/control-plane", Version: v.controlPlane, OS: osImage,
			ControlPlane: true, Etcd: provider == "rke2" || (provider == "k3s" && v.etcd)}
		for i := 0; i < v.cpNodes; i++ {
			cp.Nodes = append(cp.Nodes, &Node{Name: fmt.Sprintf("cp-%d", i), Kubelet: v.controlPlane,
				Host: Host{Repo: Minor(v.controlPlane), Kubeadm: v.controlPlane, Kubelet: v.controlPlane, ControlPlane: v.controlPlane, Held: []string{"kubeadm", "kubectl", "kubelet"}}})
		}
		w.Pools = append(w.Pools, cp)
	}
	for pi, ps := range v.pools {
		name := ps.name
		if provider == "aks" {
			// AKS agent pool names are lowercase letters and digits
			// (https://learn.microsoft.com/azure/aks/create-node-pools#limitations).
			name = aksPoolName(ps.name)
		}
		p := &Pool{Name: name, Label: label, Version: ps.version, GPUs: ps.gpus, OS: osImage}
		if ps.os != "" && (provider == "kubeadm" || provider == "k3s" || provider == "rke2" || ps.os == osUnknown) {
			p.OS = ps.os
		}
		if ps.units {
			p.UnitLabel = cliqueLabel
		}
		for i := 0; i < ps.nodes; i++ {
			n := &Node{Name: nodeName(provider, name, pi, i), Kubelet: ps.version,
				Host: Host{Repo: Minor(ps.version), Kubeadm: ps.version, Kubelet: ps.version, Held: []string{"kubeadm", "kubectl", "kubelet"}}}
			if ps.units {
				n.Unit = fmt.Sprintf("7b3d.%d", i%2)
			}
			p.Nodes = append(p.Nodes, n)
		}
		w.Pools = append(w.Pools, p)
	}
	sort.SliceStable(w.Pools, func(i, j int) bool { return w.Pools[i].ControlPlane && !w.Pools[j].ControlPlane })
	return w
}

func aksPoolName(n string) string {
	out := []rune{}
	for _, r := range n {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			out = append(out, r)
		}
	}
	return string(out) + "np"
}

// nodeName names a node as the provider does: EKS by the instance's
// private DNS name, AKS by its scale set instance, the others by pool.
func nodeName(provider, pool string, pi, i int) string {
	switch provider {
	case "eks":
		return fmt.Sprintf("ip-10-0-%d-%d.us-west-2.compute.internal", pi+1, 10+i)
	case "aks":
		return fmt.Sprintf("aks-%s-12345678-vmss%06d", pool, i)
	case "gke":
		return fmt.Sprintf("gke-inf-use1-%s-8c2f1a7e-%c", pool, 'a'+rune(i))
	}
	return fmt.Sprintf("%s-%d", pool, i)
}
