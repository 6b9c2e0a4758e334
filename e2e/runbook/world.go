package runbooke2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Target is the minor every runbook of the lane plans to.
const Target = "1.38"

// patches is the newest patch of each minor the local providers offer
// (their catalog: get-server-config, get-upgrades, the stable-X.Y.txt of
// the kubeadm steps). Fixture data of this lane, not a provider's.
var patches = map[string]int{"1.33": 9, "1.34": 6, "1.35": 5, "1.36": 4, "1.37": 2, "1.38": 1}

// Patch returns minor's full version from the catalog ("1.37" -> "1.37.2").
func Patch(minor string) string {
	p, ok := patches[minor]
	if !ok {
		return minor + ".0"
	}
	return fmt.Sprintf("%s.%d", minor, p)
}

// Minor returns a version's MAJOR.MINOR ("v1.37.2-eks-1" -> "1.37").
func Minor(v string) string {
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	m := parts[1]
	for i, r := range m {
		if r < '0' || r > '9' {
			m = m[:i]
			break
		}
	}
	return parts[0] + "." + m
}

// minorNum is the minor number of a version ("1.37.2" -> 37).
func minorNum(v string) int {
	m := Minor(v)
	n, _ := strconv.Atoi(strings.TrimPrefix(m, "1."))
	return n
}

// nextMinor is the minor after m.
func nextMinor(m string) string { return fmt.Sprintf("1.%d", minorNum(m)+1) }

// Node is one node of a pool, as the provider and the host know it.
type Node struct {
	Name string `json:"name"`
	// Kubelet is the full kubelet version, "1.37.2".
	Kubelet string `json:"kubelet"`
	// Unit is the node's fabric unit (its pool's UnitLabel), "" without.
	Unit string `json:"unit,omitempty"`
	// Host is what the node's own package manager and files hold.
	Host Host `json:"host"`
}

// Host is the part of a node that only host commands change.
type Host struct {
	// Repo is the Kubernetes package repository's minor (pkgs.k8s.io).
	Repo string `json:"repo,omitempty"`
	// Kubeadm is the installed kubeadm version; Kubelet the installed
	// kubelet package, active once the kubelet restarts.
	Kubeadm string `json:"kubeadm,omitempty"`
	Kubelet string `json:"kubelet,omitempty"`
	// ControlPlane is the version of the node's static control-plane pods
	// (kubeadm), or of the server binary (k3s, RKE2); "" on workers.
	ControlPlane string `json:"controlPlane,omitempty"`
	// Held lists the packages apt-mark hold keeps.
	Held []string `json:"held,omitempty"`
	// EnvWiped: the k3s installer rewrote the agent's env file without
	// its K3S_URL and K3S_TOKEN.
	EnvWiped bool `json:"envWiped,omitempty"`
	// Reset: kubeadm reset stopped the node's kubelet and it has not
	// joined again; the control plane sees its Ready condition Unknown.
	Reset bool `json:"reset,omitempty"`
}

// Pool is a node pool: an EKS managed node group, a GKE node pool, an AKS
// agent pool, a Cluster API MachineDeployment, or a labelled set of nodes.
type Pool struct {
	Name string `json:"name"`
	// Label is the node label that names the pool.
	Label string `json:"label"`
	// Version is the pool's version on the provider's side ("1.37.2").
	Version string `json:"version"`
	// GPUs per node (0: a CPU pool).
	GPUs int `json:"gpus,omitempty"`
	// OS is the nodes' status.nodeInfo.osImage.
	OS string `json:"os"`
	// UnitLabel is the fabric label splitting the pool, "" for none.
	UnitLabel string `json:"unitLabel,omitempty"`
	// ControlPlane marks the control-plane (server) nodes.
	ControlPlane bool `json:"controlPlane,omitempty"`
	// Etcd marks k3s servers of an embedded etcd (node-role.kubernetes.io/etcd).
	Etcd  bool    `json:"etcd,omitempty"`
	Nodes []*Node `json:"nodes"`
	// Exclusion is GKE's upgrade policy on the pool: the maintenance
	// exclusions hold it from auto-upgrades.
	UpgradeSettings string `json:"upgradeSettings,omitempty"`
}

// World is everything one scenario's provider and hosts hold: the state
// the recording endpoints answer from, the host commands change, and the
// local control plane mirrors (nodes, their kubelet versions, the
// apiserver version the proxy reports).
type World struct {
	mu sync.Mutex `json:"-"`

	Provider string `json:"provider"`
	Cluster  string `json:"cluster"`
	// Region (EKS), Location and Project (GKE), ResourceGroup and
	// Subscription (AKS), Namespace (Cluster API).
	Region        string `json:"region,omitempty"`
	Location      string `json:"location,omitempty"`
	Project       string `json:"project,omitempty"`
	ResourceGroup string `json:"resourceGroup,omitempty"`
	Subscription  string `json:"subscription,omitempty"`
	Namespace     string `json:"namespace,omitempty"`
	// ControlPlane is the control plane's full version, "1.37.2".
	ControlPlane string  `json:"controlPlane"`
	Pools        []*Pool `json:"pools"`
	// Addons are the EKS add-ons EKS manages and their versions; a
	// component of the list without an entry is self-managed.
	Addons map[string]string `json:"addons,omitempty"`
	// AddonWorkloads says whether kube-system shows the add-ons'
	// workloads (aws-node, kube-proxy, coredns); without them the
	// inventory cannot tell who manages them.
	AddonWorkloads bool `json:"addonWorkloads"`
	// Updates are the EKS updates, by id, in creation order.
	Updates []*Update `json:"updates,omitempty"`
	// Exclusions are GKE maintenance exclusions by name.
	Exclusions map[string]Exclusion `json:"exclusions,omitempty"`
	// Operations counts provider operations (GKE, AKS), for their names.
	Operations int `json:"operations,omitempty"`
	// Topology is the Cluster API Cluster's spec.topology.version.
	Topology string `json:"topology,omitempty"`
	// Snapshots are the etcd or datastore backups taken, by file.
	Snapshots []string `json:"snapshots,omitempty"`
	// PodIdentity are the EKS Pod Identity associations, by id.
	PodIdentity []PodIdentityAssociation `json:"podIdentity,omitempty"`
	// Denied are the EKS operations refused with AccessDeniedException,
	// as to a caller whose IAM policy lacks eks:<operation>.
	Denied []string `json:"denied,omitempty"`
}

// PodIdentityAssociation is one EKS Pod Identity association
// (API_PodIdentityAssociation).
type PodIdentityAssociation struct {
	ID             string `json:"id"`
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
	RoleARN        string `json:"roleArn"`
}

// Update is an EKS update (API_Update): its id, type, status and params.
type Update struct {
	ID        string            `json:"id"`
	Type      string            `json:"type"`
	Status    string            `json:"status"`
	Nodegroup string            `json:"nodegroup,omitempty"`
	Addon     string            `json:"addon,omitempty"`
	Params    map[string]string `json:"params"`
	// Seen counts DescribeUpdate calls; an update finishes at the first.
	Seen int `json:"seen"`
}

// Exclusion is a GKE maintenance exclusion.
type Exclusion struct {
	Start string `json:"start"`
	End   string `json:"end"`
	Scope string `json:"scope"`
}

// Lock and Unlock guard the world across the endpoints and the runner.
func (w *World) Lock()   { w.mu.Lock() }
func (w *World) Unlock() { w.mu.Unlock() }

// Pool returns the pool named name, nil when there is none.
func (w *World) Pool(name string) *Pool {
	for _, p := range w.Pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Node returns the node named name and its pool.
func (w *World) Node(name string) (*Node, *Pool) {
	for _, p := range w.Pools {
		for _, n := range p.Nodes {
			if n.Name == name {
				return n, p
			}
		}
	}
	return nil, nil
}

// Fingerprint is a digest of the world's state, for running a block once
// per distinct text and starting state.
func (w *World) Fingerprint() string {
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:8])
}

// Clone returns a deep copy (without the lock).
func (w *World) Clone() *World {
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	var c World
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// Restore replaces the world's state with s's.
func (w *World) Restore(s *World) {
	c := s.Clone()
	w.Provider, w.Cluster, w.Region, w.Location, w.Project = c.Provider, c.Cluster, c.Region, c.Location, c.Project
	w.ResourceGroup, w.Subscription, w.Namespace, w.ControlPlane = c.ResourceGroup, c.Subscription, c.Namespace, c.ControlPlane
	w.Pools, w.Addons, w.AddonWorkloads, w.Updates = c.Pools, c.Addons, c.AddonWorkloads, c.Updates
	w.Exclusions, w.Operations, w.Topology, w.Snapshots = c.Exclusions, c.Operations, c.Topology, c.Snapshots
}

// GitVersion is the control plane's version as the provider's apiserver
// reports it on /version.
func (w *World) GitVersion() string { return kubeletVersion(w.Provider, w.ControlPlane) }

// kubeletVersion formats a version as each provider's binaries report
// it: EKS v1.37.2-eks-<commit> and GKE v1.37.2-gke.<build>
// (https://docs.aws.amazon.com/eks/latest/userguide/platform-versions.html,
// https://cloud.google.com/kubernetes-engine/versioning), k3s v1.37.2+k3s1
// and RKE2 v1.37.2+rke2r1 (https://docs.k3s.io/upgrades/manual,
// https://docs.rke2.io/upgrades/manual_upgrade); upstream elsewhere.
func kubeletVersion(provider, v string) string {
	switch provider {
	case "eks":
		return "v" + v + "-eks-113cf36"
	case "gke":
		return "v" + v + "-gke.1200"
	case "k3s":
		return "v" + v + "+k3s1"
	case "rke2":
		return "v" + v + "+rke2r1"
	}
	return "v" + v
}

// gkeVersion is a GKE version as the container API writes it.
func gkeVersion(v string) string { return v + "-gke.1200" }

// sortedPools returns the pool names in order.
func (w *World) sortedPools() []string {
	var out []string
	for _, p := range w.Pools {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}
