package health

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Network policy continuity: every network policy object is recorded by
// kind, namespace, name and a digest of its spec; verify diffs them, and
// checks that the CNI that enforces them still runs.

// PolicyKind is a kind of network policy the gate reads.
type PolicyKind struct {
	// Kind is the name shown (NetworkPolicy, CiliumNetworkPolicy ...).
	Kind string
	// GVR is the resource listed.
	GVR schema.GroupVersionResource
	// CRD is the CustomResourceDefinition that serves it ("" for the
	// built-in NetworkPolicy).
	CRD string
}

// PolicyKinds are the kinds read, each where it is served: the built-in
// networking.k8s.io/v1 NetworkPolicy; Cilium's cilium.io/v2
// CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy (Cilium v1.16
// docs, "Network Policy": "CiliumNetworkPolicy",
// "CiliumClusterwideNetworkPolicy"); Calico's crd.projectcalico.org/v1
// NetworkPolicy and GlobalNetworkPolicy, the CRDs Calico stores them in
// (Calico v3.28 docs, "Calico network policy", "Global network policy");
// and Calico's projectcalico.org/v3 NetworkPolicy and GlobalNetworkPolicy
// where they are CRDs themselves ("native v3 CRDs", tech preview: Calico
// v3.32 docs, operations/native-v3-crds, "Calico resources are backed
// directly by CRDs, eliminating the need for the Calico aggregation API
// server").
//
// By default Calico serves projectcalico.org/v3 through its aggregation
// API server and stores it in the crd.projectcalico.org/v1 CRDs (same
// page: "By default, Calico uses an aggregation API server to serve
// projectcalico.org/v3 APIs, storing resources internally as
// crd.projectcalico.org/v1 CRDs"). API discovery lists projectcalico.org/v3
// either way, so discovery cannot tell the two apart; the CRD list can:
// a kind is read only where a CustomResourceDefinition of its name has a
// served version, so an aggregated projectcalico.org (no such CRD) is read
// once, through its v1 storage, and native v3 through its own CRDs.
var PolicyKinds = []PolicyKind{
	{Kind: "NetworkPolicy", GVR: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}},
	{Kind: "CiliumNetworkPolicy", GVR: schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnetworkpolicies"}, CRD: "ciliumnetworkpolicies.cilium.io"},
	{Kind: "CiliumClusterwideNetworkPolicy", GVR: schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumclusterwidenetworkpolicies"}, CRD: "ciliumclusterwidenetworkpolicies.cilium.io"},
	{Kind: "crd.projectcalico.org/NetworkPolicy", GVR: schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "networkpolicies"}, CRD: "networkpolicies.crd.projectcalico.org"},
	{Kind: "GlobalNetworkPolicy", GVR: schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "globalnetworkpolicies"}, CRD: "globalnetworkpolicies.crd.projectcalico.org"},
	{Kind: "projectcalico.org/NetworkPolicy", GVR: schema.GroupVersionResource{Group: "projectcalico.org", Version: "v3", Resource: "networkpolicies"}, CRD: "networkpolicies.projectcalico.org"},
	{Kind: "projectcalico.org/GlobalNetworkPolicy", GVR: schema.GroupVersionResource{Group: "projectcalico.org", Version: "v3", Resource: "globalnetworkpolicies"}, CRD: "globalnetworkpolicies.projectcalico.org"},
}

// PolicyFact is one network policy as recorded.
type PolicyFact struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Digest is the SHA-256 of the spec's JSON (keys sorted).
	Digest string `json:"digest"`
	// UID and Generation are the object's metadata.uid and
	// metadata.generation; empty and 0 in baselines recorded before they
	// were. The same object at the same generation has the same spec as
	// stored, whatever its digest reads (see DiffPolicies).
	UID        string `json:"uid,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// ID is kind, namespace and name.
func (p PolicyFact) ID() string {
	if p.Namespace == "" {
		return p.Kind + " " + p.Name
	}
	return p.Kind + " " + p.Namespace + "/" + p.Name
}

// SpecDigest digests a policy's spec (nil digests as "null"); Go's JSON
// encoding sorts map keys, so equal specs digest equally.
func SpecDigest(spec any) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// PolicyChange is one policy gone or changed since the baseline.
type PolicyChange struct {
	Policy PolicyFact
	// Gone: deleted; else its spec changed.
	Gone bool
	// Now is the policy as read now, when it changed.
	Now PolicyFact
}

func (c PolicyChange) String() string {
	if c.Gone {
		return c.Policy.ID() + " is gone since the baseline"
	}
	b, n := c.Policy, c.Now
	switch {
	case b.UID != "" && n.UID != "" && b.UID != n.UID:
		return c.Policy.ID() + " changed since the baseline (deleted and created again, spec differs)"
	case b.Generation != 0 && n.Generation != 0:
		return fmt.Sprintf("%s changed since the baseline (generation %d, now %d; spec differs)", c.Policy.ID(), b.Generation, n.Generation)
	}
	return c.Policy.ID() + " changed since the baseline (spec differs)"
}

// SameObjectSameGeneration says b and n are one object (the same uid) at
// one metadata.generation, so its stored spec has not been written since
// b was recorded and a digest that differs is defaulting, not a change.
//
// A CRD's structural defaults are applied to a custom resource when it is
// read from etcd, not written back, and do not move its generation
// ("Defaulting happens on the object ... when reading from etcd using
// the storage version defaults"; "Defaults applied when reading data from
// etcd are not automatically written back to etcd": kubernetes.io,
// "Extend the Kubernetes API with CustomResourceDefinitions", section
// "Defaulting", Kubernetes v1.34; apiextensions-apiserver v0.37.2
// pkg/apiserver/customresource_handler.go unstructuredDefaulter). A
// Cilium or Calico upgrade that adds a default to its policy CRD's schema
// therefore changes the spec every read shows, and its digest, while the
// policy is untouched. Any write that changes a custom resource outside
// metadata increments its generation (pkg/registry/customresource
// strategy.go PrepareForUpdate, v0.37.2), as does any change to a
// NetworkPolicy's spec (kubernetes v1.37.2 pkg/registry/networking/
// networkpolicy/strategy.go PrepareForUpdate).
func SameObjectSameGeneration(b, n PolicyFact) bool {
	return b.UID != "" && b.UID == n.UID && b.Generation != 0 && b.Generation == n.Generation
}

// DiffPolicies returns the baseline's policies now gone or changed, by ID;
// kinds in skip (not read now) are left out. A policy is changed only
// where its digest differs and it is not the same object at the same
// generation (SameObjectSameGeneration): defaulting does not read as a
// change. New policies are no loss of protection and are not returned
// (NewPolicies lists them).
func DiffPolicies(base, now []PolicyFact, skip map[string]bool) []PolicyChange {
	cur := map[string]PolicyFact{}
	for _, p := range now {
		cur[p.ID()] = p
	}
	var out []PolicyChange
	for _, b := range base {
		if skip[b.Kind] {
			continue
		}
		n, ok := cur[b.ID()]
		switch {
		case !ok:
			out = append(out, PolicyChange{Policy: b, Gone: true})
		case n.Digest != b.Digest && !SameObjectSameGeneration(b, n):
			out = append(out, PolicyChange{Policy: b, Now: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Policy.ID() < out[j].Policy.ID() })
	return out
}

// NewPolicies are the policies now that the baseline did not have, of
// kinds read at the baseline (a kind first read now is not news).
func NewPolicies(base, now []PolicyFact, baseKinds []string) []PolicyFact {
	had := map[string]bool{}
	for _, p := range base {
		had[p.ID()] = true
	}
	read := map[string]bool{}
	for _, k := range baseKinds {
		read[k] = true
	}
	var out []PolicyFact
	for _, p := range now {
		if read[p.Kind] && !had[p.ID()] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// EnforcingCNI is a CNI agent DaemonSet that enforces network policy.
type EnforcingCNI struct {
	// Name of the CNI.
	Name string
	// DaemonSets are the names its agent DaemonSet goes by.
	DaemonSets []string
}

// EnforcingCNIs are the CNIs whose agent DaemonSet enforces NetworkPolicy:
// Cilium's "cilium" (Cilium v1.16 Helm chart, agent DaemonSet), GKE
// Dataplane V2's "anetd" (GKE docs, "Dataplane V2", a Cilium build),
// Calico's "calico-node" (Calico v3.28 manifests, kube-system or
// calico-system), Antrea's "antrea-agent" (Antrea v2.1 manifests), Weave
// Net's "weave-net", kube-router's "kube-router", Azure NPM's "azure-npm"
// (AKS docs, "network policies") and the EKS VPC CNI's "aws-node" only
// where its network policy agent runs and is switched on (see
// awsNodeEnforces). Flannel alone enforces none and is not listed.
var EnforcingCNIs = []EnforcingCNI{
	{Name: "Cilium", DaemonSets: []string{"cilium"}},
	{Name: "GKE Dataplane V2", DaemonSets: []string{"anetd"}},
	{Name: "Calico", DaemonSets: []string{"calico-node"}},
	{Name: "Antrea", DaemonSets: []string{"antrea-agent"}},
	{Name: "Weave Net", DaemonSets: []string{"weave-net"}},
	{Name: "kube-router", DaemonSets: []string{"kube-router"}},
	{Name: "Azure NPM", DaemonSets: []string{"azure-npm"}},
	{Name: "EKS VPC CNI network policy agent", DaemonSets: []string{"aws-node"}},
}

// CNIFact is an enforcing CNI's DaemonSet as read.
type CNIFact struct {
	CNI       string `json:"cni"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Desired   int32  `json:"desired"`
	Ready     int32  `json:"ready"`
	// Excused counts its pods that are not ready on nodes that are
	// NotReady or cordoned (see DownNodePods).
	Excused int32 `json:"excused,omitempty"`
}

// OK says every pod it should run is ready, apart from those on nodes
// that are down or cordoned.
func (c CNIFact) OK() bool { return c.Desired > 0 && c.Ready+c.Excused >= c.Desired }

func (c CNIFact) String() string {
	return fmt.Sprintf("%s DaemonSet %s/%s: %d of %d pods ready%s", c.CNI, c.Namespace, c.Name, c.Ready, c.Desired, excusedNote(c.Excused))
}

func excusedNote(n int32) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d not ready on nodes NotReady or cordoned, not counted)", n)
}

// DownNodePods counts the pods of DaemonSet ns/name that are not ready
// and run on a node that is NotReady (its Ready condition not True) or
// cordoned. A DaemonSet's pods tolerate node.kubernetes.io/not-ready and
// unschedulable (the DaemonSet controller adds those tolerations:
// pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations, Kubernetes
// v1.34), so DesiredNumberScheduled still counts a node that an upgrade
// has cordoned, drained and rebooted: its agent is down with the node,
// which runs no workload pods then. Counting those pods as missing would
// fail the gate on every node an upgrade is working on. A pod not ready
// on a Ready, schedulable node still counts (DaemonPodsNotReady names
// those nodes).
func DownNodePods(ns, name string, pods []*corev1.Pod, nodes []*corev1.Node) int32 {
	excused, _ := DaemonPodsNotReady(ns, name, pods, nodes)
	return excused
}

// DaemonPodsNotReady sorts the pods of DaemonSet ns/name that are not
// ready and are bound to a node: excused counts those on a node NotReady
// or cordoned (see DownNodePods); up names, sorted, the Ready,
// schedulable nodes where one is not ready, which nothing excuses.
func DaemonPodsNotReady(ns, name string, pods []*corev1.Pod, nodes []*corev1.Node) (excused int32, up []string) {
	down := map[string]bool{}
	for _, n := range nodes {
		if n.Spec.Unschedulable || !nodeReady(*n) {
			down[n.Name] = true
		}
	}
	for _, p := range pods {
		if p.Namespace != ns || !ownedByDaemonSet(p, name) || podReady(p) || p.Spec.NodeName == "" {
			continue
		}
		if down[p.Spec.NodeName] {
			excused++
		} else {
			up = append(up, p.Spec.NodeName)
		}
	}
	sort.Strings(up)
	return excused, up
}

func ownedByDaemonSet(p *corev1.Pod, name string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Name == name {
			return true
		}
	}
	return false
}

// FindEnforcingCNIs picks the enforcing CNIs' DaemonSets out of all.
func FindEnforcingCNIs(dss []*appsv1.DaemonSet) []CNIFact {
	var out []CNIFact
	for _, ds := range dss {
		for _, c := range EnforcingCNIs {
			for _, n := range c.DaemonSets {
				if ds.Name != n {
					continue
				}
				if n == "aws-node" && !awsNodeEnforces(ds) {
					continue
				}
				out = append(out, CNIFact{CNI: c.Name, Namespace: ds.Namespace, Name: ds.Name, Desired: ds.Status.DesiredNumberScheduled, Ready: ds.Status.NumberReady})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// awsNodeEnforces says whether an aws-node DaemonSet runs the VPC CNI's
// network policy agent with enforcement on. Since amazon-vpc-cni-k8s
// v1.14.0 the agent is the aws-eks-nodeagent container (image
// amazon/aws-network-policy-agent) of aws-node, and it ships switched off:
// config/master/aws-k8s-cni.yaml at v1.14.0 and v1.23.0 give it
// --enable-network-policy=false; the EKS add-on's enableNetworkPolicy
// setting turns it to true. The container is found by name, or by image
// where a fork renamed it; the flag is a boolean flag, so a bare
// --enable-network-policy is on, and the last one given wins.
func awsNodeEnforces(ds *appsv1.DaemonSet) bool {
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "aws-eks-nodeagent" && !strings.Contains(c.Image, "aws-network-policy-agent") {
			continue
		}
		on := false
		for _, a := range append(append([]string{}, c.Command...), c.Args...) {
			switch {
			case a == "--enable-network-policy":
				on = true
			case strings.HasPrefix(a, "--enable-network-policy="):
				on, _ = strconv.ParseBool(strings.TrimPrefix(a, "--enable-network-policy="))
			}
		}
		if on {
			return true
		}
	}
	return false
}

// CNIRegressions: each baseline CNI DaemonSet that is gone now or not
// fully ready now while it was at the baseline.
func CNIRegressions(base, now []CNIFact) []string {
	cur := map[string]CNIFact{}
	for _, c := range now {
		cur[c.Namespace+"/"+c.Name] = c
	}
	var out []string
	for _, b := range base {
		n, ok := cur[b.Namespace+"/"+b.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s DaemonSet %s/%s, which enforces network policy, is gone since the baseline", b.CNI, b.Namespace, b.Name))
		case !n.OK() && b.OK():
			out = append(out, n.String()+" (all were ready at the baseline): policy is not enforced on nodes without a ready agent")
		}
	}
	return out
}
