package skew

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	"github.com/gpufleet/upgrade-plugins/pkg/nodepool"
)

// PoolLabels are the well-known node labels that name a node pool, the
// list every plugin shares (package nodepool).
var PoolLabels = nodepool.Labels

// NoPool names the pool of nodes that carry no pool label.
const NoPool = "(none)"

// controlPlaneRoles mark control-plane nodes without a pool label.
var controlPlaneRoles = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// staticComponents are the control-plane components read from
// kube-system static pods (label component=<name>, as kubeadm sets it).
var staticComponents = []string{KindAPIServer, KindControllerManager, KindScheduler, KindCloudControllerManager}

// Collector reads a cluster's version inventory. It uses paged lists and
// never one request per node.
type Collector struct {
	// Client reads the cluster.
	Client kubernetes.Interface
	// PoolLabel, when set, is the only label that names pools.
	PoolLabel string
	// PageSize is the page size of the node list (default 500).
	PageSize int64
	// Kubectl returns the gitVersion of the kubectl on PATH; nil skips it.
	// An error wrapping ErrNoKubectl means there is none.
	Kubectl func(ctx context.Context) (string, error)
	// Now returns the time stamped on the inventory (default time.Now).
	Now func() time.Time
	// Dynamic, when set, reads Cluster API Clusters for provider
	// detection (only when cluster.x-k8s.io is served).
	Dynamic dynamic.Interface
	// Nodes, when set, may hand over the nodes a caller already read, so
	// that they are not listed twice (kubectl skew preflight's drain
	// snapshot); each with its labels, spec, status.nodeInfo,
	// status.allocatable and NodeAnnotations. When it reports false (its
	// read failed) the nodes are listed as usual.
	Nodes func(ctx context.Context) ([]*corev1.Node, bool)
	// SystemPods, DaemonSets and Deployments, when set, may likewise hand
	// over the pods, DaemonSets and Deployments of kube-system a caller
	// already read (whole); when one reports false, that kind is listed as
	// usual.
	SystemPods  func(ctx context.Context) ([]*corev1.Pod, bool)
	DaemonSets  func(ctx context.Context) ([]*appsv1.DaemonSet, bool)
	Deployments func(ctx context.Context) ([]*appsv1.Deployment, bool)
	// CountGPUs also counts each pool's allocatable GPUs by resource and
	// product label (Pool.GPUs), as the fleet report shows them.
	CountGPUs bool
	// Stateful also reads, per pool, the nodes that host stateful services
	// behind PodDisruptionBudgets (Pool.StatefulNodes), which the plan
	// moves first: the PodDisruptionBudgets of every namespace, then the
	// pods of each one that allows at most one disruption.
	Stateful bool
	// Inference also reads each GPU pool's model Deployments, to tell a
	// pool that holds inference workloads (Pool.Inference), whose drain
	// it plans with InferenceOptions (inference.go).
	Inference        bool
	InferenceOptions inference.Options
	// InferenceDynamic is the dynamic client pkg/gang's discovery reads
	// the owners of pods beside the models with (Dynamic when nil); with
	// neither, a pool with such pods is drained as a training pool.
	InferenceDynamic dynamic.Interface

	platform *platformAcc
	// nodePool is each node's pool, as listNodes counted it.
	nodePool map[string]poolKey
	// listedNodes are the nodes listNodes read, kept with Inference for
	// the inference read of every GPU pool.
	listedNodes []corev1.Node
}

// ErrNoKubectl says there is no kubectl on PATH.
var ErrNoKubectl = errors.New("no kubectl on PATH")

// RequiredReadError is a failed read without which there is no report
// (/version or the node list).
type RequiredReadError struct {
	// What names the read ("listing nodes").
	What string
	// Err is the API error.
	Err error
}

// Error says what could not be read and why.
func (e *RequiredReadError) Error() string { return e.What + ": " + e.Err.Error() }

// Unwrap returns the API error, so callers can classify it.
func (e *RequiredReadError) Unwrap() error { return e.Err }

// Collect reads the inventory: /version, the nodes (paged), the kube-system
// static pods, DaemonSets and Deployments, kubectl, and with Stateful the
// nodes that host stateful services behind PodDisruptionBudgets. Forbidden
// kube-system reads become notes; a failed /version or node list is an
// error.
func (c *Collector) Collect(ctx context.Context) (Inventory, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	inv := Inventory{CollectedAt: now().UTC().Truncate(time.Second)}
	if c.Client == nil {
		return inv, errors.New("no client")
	}
	c.platform = newPlatformAcc()
	var (
		wg                             sync.WaitGroup
		mu                             sync.Mutex
		sv                             *version.Info
		svErr, nodeErr                 error
		pools                          []Pool
		podComps, wlComps, kubectlComp []Component
		notes                          []string
		stateful                       map[string][]StatefulService
	)
	addNote := func(n string) {
		mu.Lock()
		notes = append(notes, n)
		mu.Unlock()
	}
	// A failed required read ends the others: their answers would be
	// thrown away, and against a throttling or hanging apiserver each would
	// otherwise spend its own retries or --request-timeout.
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(7)
	go func() {
		defer wg.Done()
		if !c.Stateful {
			return
		}
		var ns []string
		stateful, ns = c.statefulNodes(ctx)
		for _, n := range ns {
			addNote(n)
		}
	}()
	go func() {
		defer wg.Done()
		if n := c.clusterAPI(ctx); n != "" {
			addNote(n)
		}
	}()
	go func() {
		defer wg.Done()
		if sv, svErr = serverVersion(ctx, c.Client); svErr != nil {
			cancel()
		}
	}()
	go func() {
		defer wg.Done()
		if pools, nodeErr = c.listNodes(ctx); nodeErr != nil {
			cancel()
		}
	}()
	go func() {
		defer wg.Done()
		var n string
		podComps, n = c.staticPods(ctx)
		if n != "" {
			addNote(n)
		}
	}()
	go func() {
		defer wg.Done()
		var ns []string
		wlComps, ns = c.workloads(ctx)
		for _, n := range ns {
			addNote(n)
		}
	}()
	go func() {
		defer wg.Done()
		kubectlComp = c.kubectl(ctx)
	}()
	wg.Wait()
	// A read cancelled because the other required read failed is not the
	// cause; report the one that failed.
	cancelledHere := func(err error) bool { return errors.Is(err, context.Canceled) && parent.Err() == nil }
	if svErr != nil && !cancelledHere(svErr) {
		return inv, &RequiredReadError{What: "reading /version", Err: svErr}
	}
	if nodeErr != nil && !cancelledHere(nodeErr) {
		return inv, &RequiredReadError{What: "listing nodes", Err: nodeErr}
	}
	inv.Server = ServerVersion{GitVersion: sv.GitVersion}
	if sv.EmulationMajor != "" && sv.EmulationMinor != "" {
		inv.Server.EmulationVersion = sv.EmulationMajor + "." + sv.EmulationMinor
	}
	if sv.MinCompatibilityMajor != "" && sv.MinCompatibilityMinor != "" {
		inv.Server.MinCompatibilityVersion = sv.MinCompatibilityMajor + "." + sv.MinCompatibilityMinor
	}
	statefulPools(pools, c.nodePool, stateful)
	notes = append(notes, c.inferencePools(ctx, pools)...)
	inv.InferenceRead = c.Inference
	inv.Pools = pools
	inv.Components = append(append(append(inv.Components, podComps...), wlComps...), kubectlComp...)
	// A cloud-controller-manager found as a workload replaces the
	// "not visible" static-pod entry.
	inv.Components = dropShadowed(inv.Components)
	inv.Platform = c.platform.result()
	sort.Strings(notes)
	inv.Notes = notes
	inv.Sort()
	return inv, nil
}

func serverVersion(ctx context.Context, kc kubernetes.Interface) (*version.Info, error) {
	type result struct {
		v   *version.Info
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := kc.Discovery().ServerVersion()
		ch <- result{v, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.err == nil && r.v == nil {
			r.err = errors.New("empty answer")
		}
		return r.v, r.err
	}
}

type poolKey struct{ name, label string }

type poolAcc struct {
	nodes    int
	gpuNodes int
	versions map[string]int
	unknown  []string
	nUnknown int
	gpus     map[gpuKey]*GPUCount
	osImages []string
	units    unitAcc
	autoMode int
	lt       int
	aws      int
}

// Node labels of EKS that change how a pool is upgraded: EKS Auto Mode
// nodes carry eks.amazonaws.com/compute-type=auto
// (https://docs.aws.amazon.com/eks/latest/userguide/associate-workload.html);
// managed node groups made from a launch template of the user's carry
// eks.amazonaws.com/sourceLaunchTemplateId
// (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html),
// both read 2026-09-20.
const (
	labelEKSComputeType    = "eks.amazonaws.com/compute-type"
	labelEKSLaunchTemplate = "eks.amazonaws.com/sourceLaunchTemplateId"
)

// PoolOf returns the pool name and the label that gave it for a node's
// labels; poolLabel, when set, is the only pool label tried. A node
// without a pool label that carries the control-plane role is in the
// control-plane pool, whether or not a pool label was given: the workers'
// pool label seldom marks the control-plane nodes, which are upgraded by
// their own control-plane steps, never as workers.
func PoolOf(labels map[string]string, poolLabel string) (name, label string) {
	if name, from := nodepool.Name(labels, poolLabel); name != "" {
		return name, from
	}
	for _, l := range controlPlaneRoles {
		if _, ok := labels[l]; ok {
			return "control-plane", l
		}
	}
	return NoPool, ""
}

func (c *Collector) listNodes(ctx context.Context) ([]Pool, error) {
	acc := map[poolKey]*poolAcc{}
	c.nodePool = map[string]poolKey{}
	c.listedNodes = nil
	if c.Nodes != nil {
		if nodes, ok := c.Nodes(ctx); ok {
			for _, n := range nodes {
				c.node(acc, n)
			}
			return pools(acc), nil
		}
	}
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Client.CoreV1().Nodes().List(ctx, opts)
	})
	p.PageSize = c.pageSize()
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if n, ok := obj.(*corev1.Node); ok {
			c.node(acc, n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pools(acc), nil
}

// pageSize is the size of the inventory's pages (--chunk-size), 500 when
// unset.
func (c *Collector) pageSize() int64 {
	if c.PageSize <= 0 {
		return 500
	}
	return c.PageSize
}

// node counts one node in its pool.
func (c *Collector) node(acc map[poolKey]*poolAcc, n *corev1.Node) {
	if c.Inference {
		// The inference read shares this list across its GPU pools.
		c.listedNodes = append(c.listedNodes, *n)
	}
	name, label := PoolOf(n.Labels, c.PoolLabel)
	c.platform.node(n)
	k := poolKey{name, label}
	c.nodePool[n.Name] = k
	a := acc[k]
	if a == nil {
		a = &poolAcc{versions: map[string]int{}}
		acc[k] = a
	}
	a.nodes++
	if q, ok := n.Status.Allocatable[gpucheck.GPUResource]; ok && q.Sign() > 0 {
		a.gpuNodes++
	}
	if c.CountGPUs {
		if a.gpus == nil {
			a.gpus = map[gpuKey]*GPUCount{}
		}
		countGPUs(a.gpus, n)
	}
	a.osImages = addOSImage(a.osImages, n.Status.NodeInfo.OSImage)
	a.units.add(n.Labels)
	if n.Labels[labelEKSComputeType] == "auto" {
		a.autoMode++
	}
	if n.Labels[labelEKSLaunchTemplate] != "" {
		a.lt++
	}
	if strings.HasPrefix(n.Spec.ProviderID, "aws://") {
		a.aws++
	}
	kv := strings.TrimSpace(n.Status.NodeInfo.KubeletVersion)
	if _, err := ParseVersion(kv); err != nil {
		a.nUnknown++
		if len(a.unknown) < 3 {
			a.unknown = append(a.unknown, n.Name)
		}
		return
	}
	a.versions[kv]++
}

// pools turns the per-pool counts into the inventory's pools.
func pools(acc map[poolKey]*poolAcc) []Pool {
	out := make([]Pool, 0, len(acc))
	for k, a := range acc {
		gpuNodes := a.gpuNodes
		p := Pool{Name: k.name, Label: k.label, Nodes: a.nodes, Unknown: a.nUnknown, UnknownNodes: a.unknown, GPUNodes: &gpuNodes,
			OSImages: a.osImages, Units: a.units.units(a.nodes), AutoModeNodes: a.autoMode, LaunchTemplateNodes: a.lt, AWSNodes: a.aws}
		if a.gpus != nil {
			p.GPUs = sortedGPUs(a.gpus)
		}
		sort.Strings(p.UnknownNodes)
		sort.Strings(p.OSImages)
		for v, n := range a.versions {
			p.Versions = append(p.Versions, VersionCount{Version: v, Nodes: n})
		}
		out = append(out, p)
	}
	return out
}

func isForbidden(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// staticPods reads the control-plane static pods in kube-system.
func (c *Collector) staticPods(ctx context.Context) ([]Component, string) {
	var pods []*corev1.Pod
	var err error
	ok := false
	if c.SystemPods != nil {
		pods, ok = c.SystemPods(ctx)
	}
	if !ok {
		pods = nil
		sel := "component in (" + strings.Join(staticComponents, ",") + ")"
		var list *corev1.PodList
		list, err = c.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil {
			for i := range list.Items {
				pods = append(pods, &list.Items[i])
			}
		}
	}
	var comps []Component
	if err != nil {
		state, note := StateNotVisible, fmt.Sprintf("kube-system pods could not be read (%v); control-plane instances not checked", err)
		if isForbidden(err) {
			state, note = StateForbidden, "listing pods in kube-system is forbidden; control-plane instances not checked"
		}
		for _, name := range staticComponents {
			comps = append(comps, Component{Name: name, State: state, Source: "pods kube-system component=" + name})
		}
		return comps, note
	}
	seen := map[string]bool{}
	for _, p := range pods {
		name := p.Labels["component"]
		if !slices.Contains(staticComponents, name) {
			continue // a caller's pods are all of kube-system
		}
		c.platform.staticPod(p)
		img := containerImage(p.Spec.Containers, name)
		comps = append(comps, Component{
			Name: name, Instance: p.Name, Version: ImageTag(img), State: StateVisible,
			Source: "pod kube-system/" + p.Name + " image " + img,
		})
		seen[name] = true
	}
	for _, name := range staticComponents {
		if !seen[name] {
			comps = append(comps, Component{Name: name, State: StateNotVisible, Source: "no pod in kube-system labelled component=" + name})
		}
	}
	return comps, ""
}

func containerImage(cs []corev1.Container, prefer string) string {
	for _, c := range cs {
		if c.Name == prefer {
			return c.Image
		}
	}
	for _, c := range cs {
		if strings.Contains(c.Image, prefer) {
			return c.Image
		}
	}
	if len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

// workloads reads kube-proxy, CoreDNS and the other known addons from the
// kube-system DaemonSets and Deployments.
func (c *Collector) workloads(ctx context.Context) ([]Component, []string) {
	var comps []Component
	var notes []string
	found := map[string]bool{}
	add := func(kind, name string, labels map[string]string, cs []corev1.Container) {
		m, ok := DetectAddon(AddonWorkload{Kind: kind, Namespace: metav1.NamespaceSystem, Name: name, Labels: labels, Containers: cs})
		if !ok {
			return
		}
		comps = append(comps, Component{
			Name: m.Name, Instance: kind + "/" + name, Version: m.Version, State: StateVisible,
			Source: kind + " kube-system/" + name + " image " + m.Image,
		})
		found[m.Name] = true
	}
	var dsErr, depErr error
	var dss []*appsv1.DaemonSet
	var deps []*appsv1.Deployment
	ok := false
	if c.DaemonSets != nil {
		dss, ok = c.DaemonSets(ctx)
	}
	if !ok {
		dss = nil
		var l *appsv1.DaemonSetList
		if l, dsErr = c.Client.AppsV1().DaemonSets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); dsErr == nil {
			for i := range l.Items {
				dss = append(dss, &l.Items[i])
			}
		}
	}
	if dsErr == nil {
		for _, d := range dss {
			add("daemonset", d.Name, d.Labels, d.Spec.Template.Spec.Containers)
			c.platform.eksAddon(d.Name, d.ManagedFields)
		}
	} else {
		notes = append(notes, readNote("DaemonSets", dsErr)+"; kube-proxy not checked")
	}
	ok = false
	if c.Deployments != nil {
		deps, ok = c.Deployments(ctx)
	}
	if !ok {
		deps = nil
		var l *appsv1.DeploymentList
		if l, depErr = c.Client.AppsV1().Deployments(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); depErr == nil {
			for i := range l.Items {
				deps = append(deps, &l.Items[i])
			}
		}
	}
	if depErr == nil {
		for _, d := range deps {
			add("deployment", d.Name, d.Labels, d.Spec.Template.Spec.Containers)
			c.platform.eksAddon(d.Name, d.ManagedFields)
		}
	} else {
		notes = append(notes, readNote("Deployments", depErr)+"; CoreDNS and addons not checked")
	}
	if !found[KindKubeProxy] {
		st, src := StateNotVisible, "no kube-proxy DaemonSet in kube-system"
		if dsErr != nil {
			st, src = stateFor(dsErr), "daemonsets kube-system"
		}
		comps = append(comps, Component{Name: KindKubeProxy, State: st, Source: src})
	}
	if !found[KindCoreDNS] {
		st, src := StateNotVisible, "no coredns Deployment in kube-system"
		if depErr != nil {
			st, src = stateFor(depErr), "deployments kube-system"
		}
		comps = append(comps, Component{Name: KindCoreDNS, State: st, Source: src})
	}
	return comps, notes
}

func readNote(what string, err error) string {
	if isForbidden(err) {
		return "listing " + what + " in kube-system is forbidden"
	}
	return fmt.Sprintf("listing %s in kube-system failed: %v", what, err)
}

func stateFor(err error) string {
	if isForbidden(err) {
		return StateForbidden
	}
	return StateNotVisible
}

// dropShadowed removes "not visible" entries of components that were found
// another way.
func dropShadowed(cs []Component) []Component {
	visible := map[string]bool{}
	for _, c := range cs {
		if c.State == StateVisible {
			visible[c.Name] = true
		}
	}
	out := cs[:0]
	for _, c := range cs {
		if c.State != StateVisible && visible[c.Name] {
			continue
		}
		out = append(out, c)
	}
	return out
}

func (c *Collector) kubectl(ctx context.Context) []Component {
	if c.Kubectl == nil {
		return nil
	}
	v, err := c.Kubectl(ctx)
	switch {
	case errors.Is(err, ErrNoKubectl):
		return []Component{{Name: KindKubectl, Instance: "PATH", State: StateAbsent, Source: "no kubectl on PATH"}}
	case err != nil:
		return []Component{{Name: KindKubectl, Instance: "PATH", State: StateNotVisible, Source: "kubectl version --client: " + err.Error()}}
	}
	return []Component{{Name: KindKubectl, Instance: "PATH", Version: v, State: StateVisible, Source: "kubectl version --client"}}
}
