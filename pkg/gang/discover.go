package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Labels and annotations gang discovery reads.
const (
	LabelJobSetName       = "jobset.sigs.k8s.io/jobset-name"
	LabelLWSName          = "leaderworkerset.sigs.k8s.io/name"
	LabelKueuePodGroup    = "kueue.x-k8s.io/pod-group-name"
	LabelSchedulerPodGrp  = "scheduling.x-k8s.io/pod-group"
	AnnotationVolcanoGrp  = "scheduling.k8s.io/group-name"
	LabelKueueQueue       = "kueue.x-k8s.io/queue-name"
	LabelKueueJobUID      = "kueue.x-k8s.io/job-uid"
	LabelTrainingJobName  = "training.kubeflow.org/job-name"
	annotationMirrorPod   = corev1.MirrorPodAnnotationKey
	maxOwnerDepth         = 6
	kueueGroup            = "kueue.x-k8s.io"
	workloadsResourceName = "workloads"
)

// kindInfo describes an owner kind discovery knows.
type kindInfo struct {
	resource string
	gang     Kind // empty: a kind passed through on the way up (StatefulSet)
}

var knownKinds = map[schema.GroupKind]kindInfo{
	{Group: "batch", Kind: "Job"}:                                {"jobs", KindJob},
	{Group: "jobset.x-k8s.io", Kind: "JobSet"}:                   {"jobsets", KindJobSet},
	{Group: "leaderworkerset.x-k8s.io", Kind: "LeaderWorkerSet"}: {"leaderworkersets", KindLeaderWorkerSet},
	{Group: "kubeflow.org", Kind: "PyTorchJob"}:                  {"pytorchjobs", KindPyTorchJob},
	{Group: "kubeflow.org", Kind: "MPIJob"}:                      {"mpijobs", KindMPIJob},
	{Group: "trainer.kubeflow.org", Kind: "TrainJob"}:            {"trainjobs", KindTrainJob},
	{Group: "batch.volcano.sh", Kind: "Job"}:                     {"jobs", KindVolcanoJob},
	{Group: "apps", Kind: "StatefulSet"}:                         {"statefulsets", ""},
}

// Discoverer finds the gangs with pods on a set of nodes.
type Discoverer struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Kueue may be nil when Kueue is not installed.
	Kueue kueueclient.Interface
	// GPUResources are counted as GPUs (default DefaultGPUResources).
	GPUResources []corev1.ResourceName

	owners    map[string]*unstructured.Unstructured
	workloads map[string][]kueuev1beta2.Workload
}

// Discovery is what Discover found.
type Discovery struct {
	// Gangs with at least one running pod on the chosen nodes, sorted by key.
	Gangs []*Gang
	// NodePods holds every pod bound to each chosen node.
	NodePods map[string][]corev1.Pod
	// GangOf maps a pod UID on the chosen nodes to its gang key.
	GangOf map[types.UID]string
}

// Other returns the pods on node that belong to no gang.
func (d *Discovery) Other(node string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range d.NodePods[node] {
		if _, ok := d.GangOf[p.UID]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// Gang returns the gang with key, or nil.
func (d *Discovery) Gang(key string) *Gang {
	for _, g := range d.Gangs {
		if g.Key == key {
			return g
		}
	}
	return nil
}

func (d *Discoverer) gpuResources() []corev1.ResourceName {
	if len(d.GPUResources) > 0 {
		return d.GPUResources
	}
	return DefaultGPUResources
}

// ListNodePods lists the pods bound to node.
func ListNodePods(ctx context.Context, c kubernetes.Interface, node string) ([]corev1.Pod, error) {
	list, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName == node { // fakes ignore field selectors
			out = append(out, p)
		}
	}
	return out, nil
}

func podDone(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Discover lists the pods on nodes and groups them into gangs; each gang
// includes its pods on other nodes.
func (d *Discoverer) Discover(ctx context.Context, nodes []string) (*Discovery, error) {
	d.owners = map[string]*unstructured.Unstructured{}
	d.workloads = map[string][]kueuev1beta2.Workload{}
	chosen := map[string]bool{}
	out := &Discovery{NodePods: map[string][]corev1.Pod{}, GangOf: map[types.UID]string{}}
	namespaces := map[string]bool{}
	for _, n := range nodes {
		chosen[n] = true
		pods, err := ListNodePods(ctx, d.Kube, n)
		if err != nil {
			return nil, err
		}
		out.NodePods[n] = pods
		for i := range pods {
			if podDone(&pods[i]) || isDaemonOrMirror(&pods[i]) {
				continue
			}
			key, err := d.classify(ctx, &pods[i])
			if err != nil {
				return nil, err
			}
			if key.kind != "" {
				namespaces[pods[i].Namespace] = true
			}
		}
	}
	gangs := map[string]*Gang{}
	nsList := sortedKeys(namespaces)
	for _, ns := range nsList {
		list, err := d.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing pods in namespace %s: %w", ns, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if podDone(p) || isDaemonOrMirror(p) || p.DeletionTimestamp != nil && p.Spec.NodeName == "" {
				continue
			}
			k, err := d.classify(ctx, p)
			if err != nil {
				return nil, err
			}
			if k.kind == "" {
				continue
			}
			g := gangs[k.key()]
			if g == nil {
				g = &Gang{Key: k.key(), Kind: k.kind, Namespace: p.Namespace, Name: k.name, Root: k.root, indexed: k.indexed}
				if k.rootObj != nil {
					g.Labels, g.Annotations = k.rootObj.GetLabels(), k.rootObj.GetAnnotations()
				} else {
					g.Labels, g.Annotations = p.Labels, p.Annotations
				}
				gangs[k.key()] = g
			}
			gp := Pod{Name: p.Name, UID: p.UID, Node: p.Spec.NodeName, GPUs: PodGPUs(p, d.gpuResources()), OnChosenNode: chosen[p.Spec.NodeName], GracePeriodSeconds: PodGracePeriod(p)}
			g.Pods = append(g.Pods, gp)
			if gp.OnChosenNode {
				out.GangOf[p.UID] = g.Key
			}
			if p.Status.StartTime != nil && (g.StartedAt.IsZero() || p.Status.StartTime.Time.Before(g.StartedAt)) {
				g.StartedAt = p.Status.StartTime.Time
			}
		}
	}
	for _, key := range sortedKeys(gangs) {
		g := gangs[key]
		if g.Kind == KindJob && !isGangJob(g) {
			// A plain Job pod is evicted like any other pod.
			for _, p := range g.Pods {
				delete(out.GangOf, p.UID)
			}
			continue
		}
		summarise(g)
		if g.RanksOnNodes == 0 {
			continue
		}
		if err := d.findWorkload(ctx, g); err != nil {
			return nil, err
		}
		decideMethod(g)
		out.Gangs = append(out.Gangs, g)
	}
	return out, nil
}

func isGangJob(g *Gang) bool {
	if g.Labels[LabelKueueQueue] != "" || g.Root == nil {
		return true
	}
	return g.indexed
}

func summarise(g *Gang) {
	sort.Slice(g.Pods, func(i, j int) bool { return g.Pods[i].Name < g.Pods[j].Name })
	nodes := map[string]bool{}
	g.Ranks, g.RanksOnNodes, g.GPUs, g.GPUsOnNodes = 0, 0, 0, 0
	for _, p := range g.Pods {
		g.Ranks++
		g.GPUs += p.GPUs
		if p.OnChosenNode {
			g.RanksOnNodes++
			g.GPUsOnNodes += p.GPUs
		}
		if p.Node != "" {
			nodes[p.Node] = true
		}
	}
	g.Nodes = sortedKeys(nodes)
}

func decideMethod(g *Gang) {
	if g.Workload != nil {
		g.Method = StopKueue
		return
	}
	if g.Labels[LabelKueueQueue] != "" && g.Root != nil {
		g.Method = StopUnsupported
		g.Problem = "managed by Kueue (queue " + g.Labels[LabelKueueQueue] + ") but no Workload was found; a Kueue-managed job must not be suspended directly"
		return
	}
	switch g.Kind {
	case KindJobSet, KindJob, KindTrainJob, KindPyTorchJob, KindMPIJob:
		g.Method = StopSuspend
	case KindLeaderWorkerSet:
		g.Method = StopScaleToZero
	case KindPodGroup:
		g.Method = StopDeletePods
	default:
		g.Method = StopUnsupported
		g.Problem = fmt.Sprintf("a %s cannot be stopped as a unit without Kueue", g.Kind)
	}
}

// gangKey identifies a gang while classifying pods.
type gangKey struct {
	kind    Kind
	ns      string
	name    string
	root    *Object
	rootObj *unstructured.Unstructured
	indexed bool
}

func (k gangKey) key() string { return k.ns + "/" + string(k.kind) + "/" + k.name }

func isDaemonOrMirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[annotationMirrorPod]; ok {
		return true
	}
	if c := metav1.GetControllerOf(p); c != nil && c.Kind == "DaemonSet" {
		return true
	}
	return false
}

// classify finds the gang a pod belongs to (kind "" for none).
func (d *Discoverer) classify(ctx context.Context, p *corev1.Pod) (gangKey, error) {
	// Walk the controller owners up through known kinds.
	var best gangKey
	ref := metav1.GetControllerOf(p)
	ns := p.Namespace
	for depth := 0; ref != nil && depth < maxOwnerDepth; depth++ {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			break
		}
		info, ok := knownKinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
		if !ok {
			break
		}
		obj, err := d.owner(ctx, gv.WithResource(info.resource), ns, ref.Name)
		if err != nil {
			return gangKey{}, err
		}
		if obj == nil || obj.GetUID() != ref.UID {
			break
		}
		if info.gang != "" {
			best = gangKey{kind: info.gang, ns: ns, name: obj.GetName(), rootObj: obj, root: &Object{
				APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ns, Name: obj.GetName(), UID: obj.GetUID(), Resource: info.resource,
			}}
			best.indexed = info.gang == KindJob && indexedJob(obj)
		}
		ref = metav1.GetControllerOf(obj)
	}
	if best.kind != "" {
		return best, nil
	}
	// Pod groups: labels only, no owner.
	for _, l := range []string{LabelKueuePodGroup, LabelSchedulerPodGrp} {
		if v := p.Labels[l]; v != "" {
			return gangKey{kind: KindPodGroup, ns: ns, name: v}, nil
		}
	}
	if v := p.Annotations[AnnotationVolcanoGrp]; v != "" {
		return gangKey{kind: KindPodGroup, ns: ns, name: v}, nil
	}
	// LeaderWorkerSet workers hang from the leader pod, not from the LWS;
	// JobSet pods whose owners could not be read: use their labels.
	if v := p.Labels[LabelLWSName]; v != "" {
		return d.rootFromLabel(ctx, KindLeaderWorkerSet, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", ns, v)
	}
	if v := p.Labels[LabelJobSetName]; v != "" {
		return d.rootFromLabel(ctx, KindJobSet, "jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", ns, v)
	}
	return gangKey{}, nil
}

// rootFromLabel names a gang's root object from a pod label, reading it
// (when it can) for its UID and metadata.
func (d *Discoverer) rootFromLabel(ctx context.Context, kind Kind, apiVersion, k, resource, ns, name string) (gangKey, error) {
	root := &Object{APIVersion: apiVersion, Kind: k, Namespace: ns, Name: name, Resource: resource}
	key := gangKey{kind: kind, ns: ns, name: name, root: root}
	obj, err := d.owner(ctx, root.GVR(), ns, name)
	if err != nil {
		return gangKey{}, err
	}
	if obj != nil {
		root.UID = obj.GetUID()
		key.rootObj = obj
	}
	return key, nil
}

func indexedJob(u *unstructured.Unstructured) bool {
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "completionMode")
	return mode == "Indexed"
}

// owner reads an owner object, cached; nil when it is gone or unreadable.
func (d *Discoverer) owner(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	key := gvr.String() + "|" + ns + "/" + name
	if u, ok := d.owners[key]; ok {
		return u, nil
	}
	u, err := d.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		// A forbidden owner is an error, not "no owner": treating the
		// pods of a gang it cannot read as plain pods would evict the gang
		// rank by rank, which is what gang-drain exists to prevent.
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || isNoKind(err) {
			d.owners[key] = nil
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", gvr.Resource, ns, name, err)
	}
	d.owners[key] = u
	return u, nil
}

func isNoKind(err error) bool {
	return strings.Contains(err.Error(), "the server could not find the requested resource")
}

// findWorkload finds the Kueue Workload of a gang: owned by the root, or
// labelled with the root's UID, or (pod groups) owned by its pods or named
// after the group.
func (d *Discoverer) findWorkload(ctx context.Context, g *Gang) error {
	if d.Kueue == nil {
		return nil
	}
	wls, ok := d.workloads[g.Namespace]
	if !ok {
		list, err := d.Kueue.KueueV1beta2().Workloads(g.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || isNoKind(err) {
				d.Kueue = nil // Kueue is not installed
				return nil
			}
			// Forbidden too: without its Workload a Kueue gang would be
			// suspended behind Kueue's back instead of deactivated.
			return fmt.Errorf("listing Kueue workloads in namespace %s: %w", g.Namespace, err)
		}
		wls = list.Items
		d.workloads[g.Namespace] = wls
	}
	podUIDs := map[types.UID]bool{}
	for _, p := range g.Pods {
		podUIDs[p.UID] = true
	}
	for i := range wls {
		w := &wls[i]
		match := false
		if g.Root != nil && g.Root.UID != "" {
			match = w.Labels[LabelKueueJobUID] == string(g.Root.UID)
			for _, o := range w.OwnerReferences {
				if o.UID == g.Root.UID {
					match = true
				}
			}
		} else if g.Kind == KindPodGroup {
			match = w.Name == g.Name
			for _, o := range w.OwnerReferences {
				if podUIDs[o.UID] {
					match = true
				}
			}
		}
		if match {
			g.Workload = &Object{APIVersion: kueuev1beta2.GroupVersion.String(), Kind: "Workload", Namespace: w.Namespace, Name: w.Name, UID: w.UID, Resource: workloadsResourceName}
			g.Queue = string(w.Spec.QueueName)
			return nil
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
