package skew

import (
	"fmt"
	"sort"
	"time"
)

// Component names used in inventories and findings.
const (
	KindAPIServer              = "kube-apiserver"
	KindControllerManager      = "kube-controller-manager"
	KindScheduler              = "kube-scheduler"
	KindCloudControllerManager = "cloud-controller-manager"
	KindKubelet                = "kubelet"
	KindKubeProxy              = "kube-proxy"
	KindKubectl                = "kubectl"
	KindCoreDNS                = "coredns"
)

// Component states.
const (
	// StateVisible: the version was read.
	StateVisible = "visible"
	// StateNotVisible: the component runs where the cluster does not show
	// it (a managed control plane).
	StateNotVisible = "not visible"
	// StateForbidden: reading it was forbidden.
	StateForbidden = "forbidden"
	// StateAbsent: the component is not installed (no kubectl on PATH).
	StateAbsent = "absent"
)

// ServerVersion is what the apiserver's /version reports.
type ServerVersion struct {
	// GitVersion is the binary version, such as v1.37.2.
	GitVersion string `json:"gitVersion"`
	// EmulationVersion is the MAJOR.MINOR the apiserver emulates
	// (--emulated-version, KEP-4330), when it reports one.
	EmulationVersion string `json:"emulationVersion,omitempty"`
	// MinCompatibilityVersion is the oldest MAJOR.MINOR it stays
	// compatible with, when it reports one.
	MinCompatibilityVersion string `json:"minCompatibilityVersion,omitempty"`
}

// Component is one versioned part of a cluster other than the kubelets.
type Component struct {
	// Name is the component (kube-apiserver, kube-proxy, coredns ...).
	Name string `json:"name"`
	// Instance names where it was seen: a pod, a DaemonSet, /version, PATH.
	Instance string `json:"instance,omitempty"`
	// Version is the raw version string (an image tag for pods).
	Version string `json:"version,omitempty"`
	// State is visible, not visible, forbidden or absent.
	State string `json:"state"`
	// Source says how the version was found.
	Source string `json:"source,omitempty"`
}

// VersionCount is how many nodes of a pool run one kubelet version.
type VersionCount struct {
	Version string `json:"version"`
	Nodes   int    `json:"nodes"`
}

// Pool is a group of nodes and their kubelet versions.
type Pool struct {
	// Name is the pool's name from its pool label ("(none)" without one).
	Name string `json:"name"`
	// Label is the node label the name came from.
	Label string `json:"label,omitempty"`
	// Nodes is how many nodes the pool has.
	Nodes int `json:"nodes"`
	// Versions lists the parsable kubelet versions, oldest first.
	Versions []VersionCount `json:"versions,omitempty"`
	// Unknown counts nodes without a parsable kubelet version.
	Unknown int `json:"unknown,omitempty"`
	// UnknownNodes names up to three of them.
	UnknownNodes []string `json:"unknownNodes,omitempty"`
	// GPUNodes counts the pool's nodes with allocatable GPUs; absent in
	// reports saved before it was read. The plan drains GPU pools, where
	// training gangs run, with gang-drain and the others with kubectl
	// drain.
	GPUNodes *int `json:"gpuNodes,omitempty"`
	// GPUs are the pool's allocatable GPUs by resource and product label;
	// read only when Collector.CountGPUs is set (the fleet report).
	GPUs []GPUCount `json:"gpus,omitempty"`
	// OSImages are the distinct status.nodeInfo.osImage values of the
	// pool's nodes (at most three): they tell the package manager of a
	// kubeadm node (apt on Debian and Ubuntu, dnf on the RHEL family).
	OSImages []string `json:"osImages,omitempty"`
	// Units are the pool's fabric units, from the finest rack or rail
	// topology label its nodes carry that splits the pool (FabricLabels);
	// nil when no such label is on every node. The plan drains a GPU pool
	// one unit at a time.
	Units *FabricUnits `json:"units,omitempty"`
	// AutoModeNodes counts the nodes EKS Auto Mode runs (labelled
	// eks.amazonaws.com/compute-type=auto).
	AutoModeNodes int `json:"autoModeNodes,omitempty"`
	// LaunchTemplateNodes counts the nodes of an EKS managed node group
	// made from a launch template of the user's (labelled
	// eks.amazonaws.com/sourceLaunchTemplateId), where a custom AMI is set
	// in the launch template rather than by the Kubernetes version.
	LaunchTemplateNodes int `json:"launchTemplateNodes,omitempty"`
	// AWSNodes counts the pool's nodes whose spec.providerID is an
	// aws:// one (aws:///<zone>/<instance-id>), by which the immutable
	// path (PlanOptions.ASGs) finds the node of each instance the Auto
	// Scaling group terminates.
	AWSNodes int `json:"awsNodes,omitempty"`
	// StatefulNodes are the pool's nodes that host pods of a StatefulSet
	// whose PodDisruptionBudget allows at most one disruption (a quorum,
	// a primary), sorted by name: the plan moves them first in the pool,
	// one at a time, each service checked after each.
	StatefulNodes []StatefulNode `json:"statefulNodes,omitempty"`
	// Inference is set on a GPU pool that holds inference workloads
	// (model Deployments behind PodDisruptionBudgets, no training gang),
	// read with Collector.Inference: the plan drains it with
	// gang-drain run --inference.
	Inference *InferencePool `json:"inference,omitempty"`
}

// FabricUnits are the values of one topology label over a pool's nodes.
type FabricUnits struct {
	// Label is the topology label.
	Label string `json:"label"`
	// Values are its distinct values, sorted (at most maxUnitValues).
	Values []string `json:"values"`
	// More counts the values left out.
	More int `json:"more,omitempty"`
}

// MinMax returns the oldest and newest parsable kubelet version of the
// pool; ok is false when none parses.
func (p Pool) MinMax() (lo, hi Version, ok bool) {
	for _, vc := range p.Versions {
		v, err := ParseVersion(vc.Version)
		if err != nil {
			continue
		}
		if !ok || v.Compare(lo) < 0 {
			lo = v
		}
		if !ok || v.Compare(hi) > 0 {
			hi = v
		}
		ok = true
	}
	return lo, hi, ok
}

// Inventory is every version the tool could see in one cluster. It is
// saved inside the report (`kubectl skew -o yaml`) and read back by the
// offline plan, so its fields are stable.
type Inventory struct {
	// CollectedAt is when it was read.
	CollectedAt time.Time `json:"collectedAt"`
	// Server is the apiserver's /version answer.
	Server ServerVersion `json:"server"`
	// Components are the apiserver instances, controllers, addons and kubectl.
	Components []Component `json:"components"`
	// Pools hold the kubelets, sorted by name.
	Pools []Pool `json:"pools"`
	// Notes explain what could not be read.
	Notes []string `json:"notes,omitempty"`
	// Platform is what the cluster shows about its provider (absent in
	// reports saved before it existed).
	Platform *Platform `json:"platform,omitempty"`
	// InferenceRead is set when the GPU pools were read for inference
	// workloads (Collector.Inference: the plan and the fleet programme's
	// live read), so that a pool without Pool.Inference is known to hold
	// none. The version check's report (kubectl skew -o yaml) does not
	// read them: planned from it, a GPU pool's drain is not known.
	InferenceRead bool `json:"inferenceRead,omitempty"`
}

// Sort orders components and pools so reports are stable.
func (inv *Inventory) Sort() {
	sort.SliceStable(inv.Components, func(i, j int) bool {
		a, b := inv.Components[i], inv.Components[j]
		if ra, rb := componentRank(a.Name), componentRank(b.Name); ra != rb {
			return ra < rb
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Instance < b.Instance
	})
	sort.SliceStable(inv.Pools, func(i, j int) bool { return inv.Pools[i].Name < inv.Pools[j].Name })
	for i := range inv.Pools {
		vs := inv.Pools[i].Versions
		sort.SliceStable(vs, func(a, b int) bool {
			va, ea := ParseVersion(vs[a].Version)
			vb, eb := ParseVersion(vs[b].Version)
			if ea == nil && eb == nil {
				if c := va.Compare(vb); c != 0 {
					return c < 0
				}
			}
			return vs[a].Version < vs[b].Version
		})
	}
}

func componentRank(name string) int {
	switch name {
	case KindAPIServer:
		return 0
	case KindControllerManager:
		return 1
	case KindScheduler:
		return 2
	case KindCloudControllerManager:
		return 3
	case KindKubelet:
		return 4
	case KindKubeProxy:
		return 5
	case KindCoreDNS:
		return 6
	case KindKubectl:
		return 8
	}
	return 7
}

// APIServerVersions returns the versions of every apiserver the inventory
// shows: the visible instances and /version. ok is false when none parses.
func (inv Inventory) APIServerVersions() (oldest, newest Version, ok bool) {
	consider := func(s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		if !ok || v.Compare(oldest) < 0 {
			oldest = v
		}
		if !ok || v.Compare(newest) > 0 {
			newest = v
		}
		ok = true
	}
	consider(inv.Server.GitVersion)
	for _, c := range inv.Components {
		if c.Name == KindAPIServer && c.State == StateVisible {
			consider(c.Version)
		}
	}
	return oldest, newest, ok
}

// Nodes writes a node count: "1 node", "3 nodes".
func Nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// Minors writes a count of minor versions: "1 minor", "2 minors".
func Minors(n int) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d minor", n)
	}
	return fmt.Sprintf("%d minors", n)
}
