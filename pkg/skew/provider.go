package skew

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Provider is who runs the cluster's control plane and node pools; it
// decides the commands of each plan step.
type Provider string

// Providers the plan knows.
const (
	ProviderUnknown Provider = "unknown"
	ProviderKubeadm Provider = "kubeadm"
	ProviderEKS     Provider = "eks"
	ProviderGKE     Provider = "gke"
	ProviderAKS     Provider = "aks"
	ProviderCAPI    Provider = "capi"
	ProviderK3s     Provider = "k3s"
	ProviderRKE2    Provider = "rke2"
)

// Providers lists every provider, for flag help and completion.
var Providers = []Provider{ProviderKubeadm, ProviderEKS, ProviderGKE, ProviderAKS, ProviderCAPI, ProviderK3s, ProviderRKE2, ProviderUnknown}

// ParseProvider reads a --provider value.
func ParseProvider(s string) (Provider, error) {
	t := Provider(strings.ToLower(strings.TrimSpace(s)))
	if t == "clusterapi" || t == "cluster-api" {
		t = ProviderCAPI
	}
	for _, p := range Providers {
		if p == t {
			return p, nil
		}
	}
	var names []string
	for _, p := range Providers {
		names = append(names, string(p))
	}
	return "", fmt.Errorf("provider %q: want one of %s", s, strings.Join(names, ", "))
}

// Managed reports whether the provider runs the control plane itself
// (etcd, apiservers, controllers), so the user has no etcd snapshot or
// per-apiserver step to take.
func (p Provider) Managed() bool {
	switch p {
	case ProviderEKS, ProviderGKE, ProviderAKS, ProviderCAPI:
		return true
	}
	return false
}

// Title is the provider's name for humans.
func (p Provider) Title() string {
	switch p {
	case ProviderEKS:
		return "EKS"
	case ProviderGKE:
		return "GKE"
	case ProviderAKS:
		return "AKS"
	case ProviderCAPI:
		return "Cluster API"
	case ProviderK3s:
		return "k3s"
	case ProviderRKE2:
		return "RKE2"
	case ProviderKubeadm:
		return "kubeadm"
	}
	return "unknown provider"
}

// managedSeveral reports whether the provider's control plane runs more
// than one apiserver instance, so that they are mixed during a hop. EKS
// runs at least two API server instances in distinct availability zones
// (https://docs.aws.amazon.com/eks/latest/userguide/eks-architecture.html);
// AKS runs its control plane replicated
// (https://learn.microsoft.com/azure/aks/core-aks-concepts); a regional
// GKE cluster runs replicas of the control plane in several zones
// (https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters);
// Cluster API's KubeadmControlPlane rolls its machines one at a time, so
// old and new apiservers overlap.
func managedSeveral(p Provider) bool { return p.Managed() }

// Platform is what the cluster shows about where it runs, saved inside
// the inventory so that an offline plan detects the same provider.
type Platform struct {
	// ProviderIDs counts nodes per spec.providerID scheme (aws, gce,
	// azure, k3s, kind ...); "" counts nodes without one.
	ProviderIDs map[string]int `json:"providerIDs,omitempty"`
	// Labels counts nodes carrying each provider label.
	Labels map[string]int `json:"labels,omitempty"`
	// ControlPlanePods counts kube-system pods labelled
	// component=kube-apiserver, as kubeadm and RKE2 label their static
	// pods: an apiserver the cluster runs itself.
	ControlPlanePods int `json:"controlPlanePods"`
	// TierLabelled counts those also labelled tier=control-plane.
	TierLabelled int `json:"tierLabelled,omitempty"`
	// MirrorPods counts those that are mirror pods of static pods.
	MirrorPods int `json:"mirrorPods,omitempty"`
	// ClusterName, Region, Zones, Project and ResourceGroup are what the
	// node labels and provider IDs tell of the cluster, when they do.
	ClusterName   string   `json:"clusterName,omitempty"`
	Region        string   `json:"region,omitempty"`
	Zones         []string `json:"zones,omitempty"`
	Project       string   `json:"project,omitempty"`
	ResourceGroup string   `json:"resourceGroup,omitempty"`
	// ClusterAPI lists the cluster.x-k8s.io Clusters the apiserver serves
	// (nil when the API is not served or could not be read).
	ClusterAPI []ClusterAPICluster `json:"clusterAPI,omitempty"`
	// ClusterAPIServed is set when cluster.x-k8s.io is served.
	ClusterAPIServed bool `json:"clusterAPIServed,omitempty"`
	// ClusterAPIName and ClusterAPINamespace come from the node
	// annotations Cluster API's machine controller sets.
	ClusterAPIName      string `json:"clusterAPIName,omitempty"`
	ClusterAPINamespace string `json:"clusterAPINamespace,omitempty"`
	// ClusterAPIVersion is the served version of cluster.x-k8s.io that the
	// Clusters were read at (v1beta1, v1beta2).
	ClusterAPIVersion string `json:"clusterAPIVersion,omitempty"`
	// EtcdNodes counts nodes labelled node-role.kubernetes.io/etcd, as k3s
	// and RKE2 label the servers of an embedded etcd: a k3s server without
	// it keeps its data in SQLite or an external datastore.
	EtcdNodes int `json:"etcdNodes,omitempty"`
	// ServerNodes counts nodes labelled node-role.kubernetes.io/control-plane.
	ServerNodes int `json:"serverNodes,omitempty"`
	// EKSAddons says, for each EKS add-on whose workload kube-system runs
	// (vpc-cni, kube-proxy, coredns), whether EKS manages it (true: its
	// managedFields name the manager eks) or it is self-managed (false).
	EKSAddons map[string]bool `json:"eksAddons,omitempty"`
}

// ClusterAPICluster is one cluster.x-k8s.io Cluster.
type ClusterAPICluster struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Class is spec.topology.class (ClusterClass), "" without topology.
	Class string `json:"class,omitempty"`
	// Version is spec.topology.version.
	Version string `json:"version,omitempty"`
	// MachineDeployments and MachinePools are the names of the worker
	// topologies (spec.topology.workers.machineDeployments[].name and
	// machinePools[].name), which the topology controller rolls to
	// spec.topology.version after the control plane unless deferred.
	MachineDeployments []string `json:"machineDeployments,omitempty"`
	MachinePools       []string `json:"machinePools,omitempty"`
	// WorkersRead says the worker topologies were read (a report saved
	// before they were has none, which does not mean there are none).
	WorkersRead bool `json:"workersRead,omitempty"`
}

// Node labels and annotations that tell the provider. Sources:
//   - eks.amazonaws.com/nodegroup: EKS managed node groups label their
//     nodes (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html);
//     alpha.eksctl.io/cluster-name: eksctl's node groups.
//   - cloud.google.com/gke-nodepool: GKE
//     (https://cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels).
//   - kubernetes.azure.com/cluster (the node resource group) and
//     kubernetes.azure.com/agentpool: AKS
//     (https://learn.microsoft.com/azure/aks/use-labels).
//   - cluster.x-k8s.io/cluster-name and cluster-namespace annotations:
//     Cluster API's machine controller
//     (https://cluster-api.sigs.k8s.io/reference/api/labels-and-annotations).
//   - node.k3s.io/... and k3s:// provider IDs: k3s; rke2.io/...: RKE2.
const (
	labelEKSNodegroup   = "eks.amazonaws.com/nodegroup"
	labelEksctlCluster  = "alpha.eksctl.io/cluster-name"
	labelGKENodepool    = "cloud.google.com/gke-nodepool"
	labelAKSCluster     = "kubernetes.azure.com/cluster"
	labelAKSAgentpool   = "kubernetes.azure.com/agentpool"
	labelRegion         = "topology.kubernetes.io/region"
	annCAPIClusterName  = "cluster.x-k8s.io/cluster-name"
	annCAPIClusterNS    = "cluster.x-k8s.io/cluster-namespace"
	labelEtcdRole       = "node-role.kubernetes.io/etcd"
	labelTierCP         = "tier"
	tierControlPlane    = "control-plane"
	maxPlatformZones    = 8
	platformLabelPrefix = "node.k3s.io/"
)

// NodeAnnotations are the node annotations the inventory reads (Cluster
// API's cluster name and namespace): a caller that hands the Collector
// nodes it read itself (Collector.Nodes) keeps at least these, with the
// labels, spec, status.nodeInfo and status.allocatable.
var NodeAnnotations = []string{annCAPIClusterName, annCAPIClusterNS}

var providerLabels = []string{labelEKSNodegroup, labelEksctlCluster, labelGKENodepool, labelAKSCluster, labelAKSAgentpool}

// platformAcc gathers a Platform while nodes and pods are read.
type platformAcc struct {
	mu    sync.Mutex
	p     Platform
	zones map[string]bool
}

func newPlatformAcc() *platformAcc {
	return &platformAcc{p: Platform{ProviderIDs: map[string]int{}, Labels: map[string]int{}}, zones: map[string]bool{}}
}

// node records one node's provider ID, labels and annotations.
func (a *platformAcc) node(n *corev1.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	scheme, rest, _ := strings.Cut(n.Spec.ProviderID, "://")
	a.p.ProviderIDs[scheme]++
	for _, l := range providerLabels {
		if _, ok := n.Labels[l]; ok {
			a.p.Labels[l]++
		}
	}
	for k := range n.Labels {
		if strings.HasPrefix(k, platformLabelPrefix) {
			a.p.Labels[platformLabelPrefix+"*"]++
			break
		}
	}
	if _, ok := n.Labels[labelEtcdRole]; ok {
		a.p.EtcdNodes++
	}
	if _, ok := n.Labels[controlPlaneRoles[0]]; ok {
		a.p.ServerNodes++
	}
	if v := n.Labels[labelEksctlCluster]; v != "" && a.p.ClusterName == "" {
		a.p.ClusterName = v
	}
	if v := n.Labels[labelRegion]; v != "" && a.p.Region == "" {
		a.p.Region = v
	}
	if v := n.Annotations[annCAPIClusterName]; v != "" && a.p.ClusterAPIName == "" {
		a.p.ClusterAPIName, a.p.ClusterAPINamespace = v, n.Annotations[annCAPIClusterNS]
	}
	switch scheme {
	case "aws":
		// aws:///<zone>/<instance-id>: the in-tree and external AWS cloud
		// providers' format (kubernetes/cloud-provider-aws, instances.go).
		parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
		if len(parts) == 2 && parts[0] != "" {
			a.zone(parts[0])
		}
	case "gce":
		// gce://<project>/<zone>/<instance>: cloud-provider-gcp
		// (providers/gce/gce_util.go, splitProviderID).
		parts := strings.Split(rest, "/")
		if len(parts) == 3 {
			if a.p.Project == "" {
				a.p.Project = parts[0]
			}
			a.zone(parts[1])
		}
	case "azure":
		// azure:///subscriptions/<sub>/resourceGroups/<node resource
		// group>/providers/...: cloud-provider-azure.
		parts := strings.Split(rest, "/")
		for i := 0; i+1 < len(parts); i++ {
			if strings.EqualFold(parts[i], "resourceGroups") && a.p.ResourceGroup == "" {
				a.p.ResourceGroup = parts[i+1]
			}
		}
	}
	if v := n.Labels[labelAKSCluster]; v != "" && a.p.ResourceGroup == "" {
		a.p.ResourceGroup = v
	}
}

func (a *platformAcc) zone(z string) {
	if len(a.zones) < maxPlatformZones {
		a.zones[z] = true
	}
}

// staticPod records a kube-system control-plane pod. kubeadm writes its
// static pods with labels component=<name> and tier=control-plane
// (kubernetes cmd/kubeadm/app/util/staticpod/utils.go, ComponentPod), and
// the kubelet's mirror pods carry the kubernetes.io/config.mirror
// annotation (k8s.io/api/core/v1 MirrorPodAnnotationKey).
func (a *platformAcc) staticPod(p *corev1.Pod) {
	if p.Labels["component"] != KindAPIServer {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.p.ControlPlanePods++
	if p.Labels[labelTierCP] == tierControlPlane {
		a.p.TierLabelled++
	}
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		a.p.MirrorPods++
	}
}

func (a *platformAcc) result() *Platform {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.p
	// Only an AWS cluster's add-ons are worth recording: one with the VPC
	// CNI's aws-node or an add-on EKS manages.
	if _, vpc := p.EKSAddons["vpc-cni"]; !vpc {
		eks := false
		for _, m := range p.EKSAddons {
			eks = eks || m
		}
		if !eks {
			p.EKSAddons = nil
		}
	}
	for z := range a.zones {
		p.Zones = append(p.Zones, z)
	}
	sort.Strings(p.Zones)
	if p.Region == "" && len(p.Zones) > 0 {
		p.Region = regionOfZone(p.Zones[0])
	}
	sort.Slice(p.ClusterAPI, func(i, j int) bool {
		return p.ClusterAPI[i].Namespace+"/"+p.ClusterAPI[i].Name < p.ClusterAPI[j].Namespace+"/"+p.ClusterAPI[j].Name
	})
	return &p
}

// regionOfZone strips the zone suffix: us-west-2a -> us-west-2 (AWS),
// us-central1-a -> us-central1 (GCP).
func regionOfZone(z string) string {
	if i := strings.LastIndexByte(z, '-'); i > 0 && len(z)-i == 2 {
		return z[:i]
	}
	if n := len(z); n > 1 && z[n-1] >= 'a' && z[n-1] <= 'z' && z[n-2] >= '0' && z[n-2] <= '9' {
		return z[:n-1]
	}
	return z
}

// Detection is the provider a plan uses and why.
type Detection struct {
	// Provider is the provider the commands are written for.
	Provider Provider `json:"provider"`
	// Source is "detected" or "--provider".
	Source string `json:"source"`
	// Evidence lists what the decision rests on.
	Evidence []string `json:"evidence,omitempty"`
}

// versionSuffix returns the vendor part of a version string.
func versionSuffix(s string) string {
	v, err := ParseVersion(s)
	if err != nil {
		return ""
	}
	return v.Pre + "+" + v.Build
}

// DetectProvider decides the provider from what the inventory shows,
// strongest signal first:
//  1. k3s and RKE2 put their name in the build metadata of every version
//     (v1.31.4+k3s1, v1.31.4+rke2r1; https://docs.k3s.io/upgrades/manual,
//     https://docs.rke2.io/upgrades/manual_upgrade).
//  2. EKS, GKE and AKS apiservers report vendor versions (v1.30.2-eks-1a2b3c4,
//     v1.30.2-gke.1587003; https://docs.aws.amazon.com/eks/latest/userguide/platform-versions.html,
//     https://cloud.google.com/kubernetes-engine/versioning).
//  3. A Cluster API Cluster with a topology (ClusterClass) that names this
//     cluster (node annotations) or is the only one served
//     (https://cluster-api.sigs.k8s.io/tasks/experimental-features/cluster-class/operate-cluster).
//  4. kube-system pods labelled component=kube-apiserver (kubeadm's static
//     pods, also tier=control-plane): a self-managed kubeadm control plane.
//  5. Node signals where no apiserver is visible: EKS node group labels and
//     aws:// provider IDs, GKE node-pool labels and gce:// IDs, AKS labels
//     and azure:// IDs, and kubelet version suffixes (-eks-, -gke.).
func DetectProvider(inv Inventory) Detection {
	d := Detection{Provider: ProviderUnknown, Source: "detected"}
	pf := inv.Platform
	if pf == nil {
		pf = &Platform{}
	}
	versions := []string{inv.Server.GitVersion}
	kubelets := map[string]int{}
	for _, pl := range inv.Pools {
		for _, vc := range pl.Versions {
			versions = append(versions, vc.Version)
			kubelets[vc.Version] += vc.Nodes
		}
	}
	has := func(sub string, vs []string) string {
		for _, v := range vs {
			if strings.Contains(versionSuffix(v), sub) {
				return v
			}
		}
		return ""
	}
	if v := has("+k3s", versions); v != "" || pf.ProviderIDs["k3s"] > 0 {
		d.Provider = ProviderK3s
		d.Evidence = append(d.Evidence, evidenceOr(v != "", "version "+v, fmt.Sprintf("%d nodes with k3s:// provider IDs", pf.ProviderIDs["k3s"])))
		return d
	}
	if v := has("+rke2", versions); v != "" {
		d.Provider = ProviderRKE2
		d.Evidence = append(d.Evidence, "version "+v)
		return d
	}
	server := versionSuffix(inv.Server.GitVersion)
	switch {
	case strings.Contains(server, "eks-"):
		d.Provider = ProviderEKS
	case strings.Contains(server, "gke."):
		d.Provider = ProviderGKE
	}
	if d.Provider != ProviderUnknown {
		d.Evidence = append(d.Evidence, "apiserver version "+inv.Server.GitVersion)
		d.Evidence = append(d.Evidence, nodeEvidence(pf, d.Provider)...)
		return d
	}
	if c, ok := capiCluster(pf); ok {
		d.Provider = ProviderCAPI
		d.Evidence = append(d.Evidence, fmt.Sprintf("Cluster API Cluster %s/%s with topology class %s at %s", c.Namespace, c.Name, c.Class, c.Version))
		return d
	}
	// The visible apiserver instances are those same pods; a report saved
	// before the platform was recorded still has them.
	cpPods := pf.ControlPlanePods
	if cpPods == 0 {
		for _, c := range inv.Components {
			if c.Name == KindAPIServer && c.State == StateVisible {
				cpPods++
			}
		}
	}
	if cpPods > 0 {
		d.Provider = ProviderKubeadm
		e := fmt.Sprintf("%s labelled component=kube-apiserver in kube-system", podCount(cpPods))
		if pf.TierLabelled > 0 {
			e += fmt.Sprintf(", %d of them tier=control-plane", pf.TierLabelled)
		}
		if pf.MirrorPods > 0 {
			e += fmt.Sprintf(" (%d mirror pods of static pods)", pf.MirrorPods)
		}
		d.Evidence = append(d.Evidence, e)
		return d
	}
	// No apiserver is visible: the node side tells a managed provider.
	score := map[Provider]int{}
	nodes := 0
	for _, n := range pf.ProviderIDs {
		nodes += n
	}
	score[ProviderEKS] = pf.ProviderIDs["aws"] + pf.Labels[labelEKSNodegroup] + pf.Labels[labelEksctlCluster]
	score[ProviderGKE] = pf.ProviderIDs["gce"] + pf.Labels[labelGKENodepool]
	score[ProviderAKS] = pf.ProviderIDs["azure"] + pf.Labels[labelAKSCluster] + pf.Labels[labelAKSAgentpool]
	for v, n := range kubelets {
		switch s := versionSuffix(v); {
		case strings.Contains(s, "eks-"):
			score[ProviderEKS] += n
		case strings.Contains(s, "gke."):
			score[ProviderGKE] += n
		}
	}
	best, bestN, tie := ProviderUnknown, 0, false
	for _, p := range []Provider{ProviderEKS, ProviderGKE, ProviderAKS} {
		switch {
		case score[p] > bestN:
			best, bestN, tie = p, score[p], false
		case score[p] == bestN && bestN > 0:
			tie = true
		}
	}
	if bestN == 0 || tie {
		d.Evidence = append(d.Evidence, "no provider signal: no vendor version, no kube-apiserver static pod, no provider label or ID on the nodes")
		if tie {
			d.Evidence = []string{"conflicting node signals of several providers"}
		}
		return d
	}
	d.Provider = best
	d.Evidence = append(d.Evidence, "no kube-apiserver pod in kube-system")
	d.Evidence = append(d.Evidence, nodeEvidence(pf, best)...)
	var suffixed []string
	for v := range kubelets {
		s := versionSuffix(v)
		if (best == ProviderEKS && strings.Contains(s, "eks-")) || (best == ProviderGKE && strings.Contains(s, "gke.")) {
			suffixed = append(suffixed, v)
		}
	}
	sort.Strings(suffixed)
	if len(suffixed) > 0 {
		d.Evidence = append(d.Evidence, "kubelet versions "+strings.Join(suffixed, ", "))
	}
	return d
}

func evidenceOr(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}

func podCount(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

func nodeEvidence(pf *Platform, p Provider) []string {
	var out []string
	add := func(scheme string, labels ...string) {
		if n := pf.ProviderIDs[scheme]; n > 0 {
			out = append(out, fmt.Sprintf("%s with %s:// provider IDs", Nodes(n), scheme))
		}
		for _, l := range labels {
			if n := pf.Labels[l]; n > 0 {
				out = append(out, fmt.Sprintf("%s labelled %s", Nodes(n), l))
			}
		}
	}
	switch p {
	case ProviderEKS:
		add("aws", labelEKSNodegroup, labelEksctlCluster)
	case ProviderGKE:
		add("gce", labelGKENodepool)
	case ProviderAKS:
		add("azure", labelAKSCluster, labelAKSAgentpool)
	}
	return out
}

// capiCluster returns the Cluster API Cluster with a topology that this
// cluster is: the one its nodes name, or the only one with a topology.
func capiCluster(pf *Platform) (ClusterAPICluster, bool) {
	var topo []ClusterAPICluster
	for _, c := range pf.ClusterAPI {
		if c.Class == "" {
			continue
		}
		if pf.ClusterAPIName != "" && c.Name == pf.ClusterAPIName && (pf.ClusterAPINamespace == "" || c.Namespace == pf.ClusterAPINamespace) {
			return c, true
		}
		topo = append(topo, c)
	}
	if len(topo) == 1 {
		return topo[0], true
	}
	return ClusterAPICluster{}, false
}

// eksAddonWorkloads maps the kube-system workloads of the EKS add-ons to
// the add-on names aws eks update-addon takes.
var eksAddonWorkloads = map[string]string{"aws-node": "vpc-cni", "kube-proxy": "kube-proxy", "coredns": "coredns"}

// eksAddon records whether a kube-system workload of an EKS add-on is
// managed by EKS: EKS installs its add-ons with server-side apply and
// "both types of field are tagged with manager: eks"
// (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-field-management.html,
// read 2026-09-20). Only clusters that look like EKS record it.
func (a *platformAcc) eksAddon(workload string, mf []metav1.ManagedFieldsEntry) {
	addon, ok := eksAddonWorkloads[workload]
	if !ok {
		return
	}
	managed := false
	for _, m := range mf {
		if m.Manager == "eks" {
			managed = true
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.p.EKSAddons == nil {
		a.p.EKSAddons = map[string]bool{}
	}
	a.p.EKSAddons[addon] = managed
}
