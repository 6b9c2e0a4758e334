package inference

// Reading an inference pool from the cluster: its nodes, the model
// Deployments with replicas on them, their PodDisruptionBudgets and weights,
// and the free GPUs of the same product outside the pool.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/kubectl/pkg/util/podutils"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/nodepool"
)

// Model is one model Deployment with replicas on the pool: a Deployment
// whose pods ask for GPUs.
type Model struct {
	// Key is namespace/name.
	Key       string `json:"key"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Replicas is spec.replicas before any surge of a run; Desired is
	// spec.replicas now (Replicas plus a surge not yet undone).
	Replicas int32 `json:"replicas"`
	Desired  int32 `json:"desired"`
	// Surged is the surge a run applied and has not undone, and SurgedBy
	// that run.
	Surged   int32  `json:"surged,omitempty"`
	SurgedBy string `json:"surgedBy,omitempty"`
	// Ready counts the model's Ready pods (serving), Loading those on a
	// node outside the pool that are not Ready yet (loading their weights:
	// a run waits for them before its next wave), Pending those no node
	// has taken.
	Ready   int32 `json:"ready"`
	Loading int32 `json:"loading"`
	Pending int32 `json:"pending"`
	// GPUsPerReplica are the GPUs one pod asks for.
	GPUsPerReplica int64 `json:"gpusPerReplica"`
	// Product is the GPU product of the pool nodes it runs on.
	Product string `json:"product,omitempty"`
	// Weights are what a replica loads before it is Ready; nil when
	// nothing says (WeightsProblem then says what to do).
	Weights        *Weights `json:"weights,omitempty"`
	WeightsProblem string   `json:"weightsProblem,omitempty"`
	// PDB names the model's PodDisruptionBudget (in its namespace) and
	// PDBRule its rule; PDBProblem is set when more than one selects it,
	// which the eviction API refuses.
	PDB        string `json:"pdb,omitempty"`
	PDBRule    string `json:"pdbRule,omitempty"`
	PDBProblem string `json:"pdbProblem,omitempty"`
	// OnPool counts the model's pods on each pool node not yet drained,
	// and OnPoolReady the Ready ones among them.
	OnPool      map[string]int32 `json:"onPool"`
	OnPoolReady map[string]int32 `json:"-"`
	// Selector selects the model's pods.
	Selector string `json:"selector"`
	// NoReadinessProbe names the serving containers (those asking for
	// GPUs) that have neither a readinessProbe nor a startupProbe: such a
	// replica is Ready once its
	// process started, not once its weights are loaded, so Ready does not
	// pace the waves.
	NoReadinessProbe []string `json:"noReadinessProbe,omitempty"`
	// Autoscaler names the HorizontalPodAutoscaler whose scaleTargetRef is
	// the Deployment: it sets spec.replicas itself, so the plan does not
	// surge the model.
	Autoscaler string `json:"autoscaler,omitempty"`
	// GitOps names the GitOps tool that applies the Deployment (Argo CD or
	// Flux, from its tracking label or annotation): its sync puts
	// spec.replicas back to what its source says, so the plan does not
	// surge the model.
	GitOps string `json:"gitOps,omitempty"`

	pdb      *policyv1.PodDisruptionBudget
	template *corev1.Pod
	// sample is one of its pods on the pool, as the scheduler places its
	// replacements (placement.go).
	sample *corev1.Pod
}

// OnPoolTotal is the model's pods on pool nodes not yet drained.
func (m *Model) OnPoolTotal() int32 {
	var n int32
	for _, v := range m.OnPool {
		n += v
	}
	return n
}

// PoolNode is one node of the pool with its run state.
type PoolNode struct {
	Name    string         `json:"name"`
	GPUs    int64          `json:"gpus"`
	Product string         `json:"product,omitempty"`
	RunID   string         `json:"runID,omitempty"`
	State   gang.NodeState `json:"state,omitempty"`
	// Drained is true when a run of gang-drain has drained it.
	Drained bool `json:"drained"`
}

// HeadroomNode is a schedulable GPU node outside the pool and its free GPUs.
type HeadroomNode struct {
	Name     string `json:"name"`
	Product  string `json:"product,omitempty"`
	FreeGPUs int64  `json:"freeGPUs"`

	node *corev1.Node
}

// Pool is what Read found.
type Pool struct {
	Nodes    []PoolNode     `json:"nodes"`
	Models   []*Model       `json:"models"`
	Headroom []HeadroomNode `json:"headroom"`
	// OtherPods are pods on the pool's nodes that no model owns; the drain
	// evicts them as any drain does.
	OtherPods []string `json:"otherPods,omitempty"`
	// Gangs are training gangs with ranks on the pool (pkg/gang's
	// discovery): a pool that holds them is drained by gang-drain's
	// checkpoint flow, not as an inference pool.
	Gangs []string `json:"gangs,omitempty"`
	// Notes are what the reader could not read, with what it means.
	Notes []string `json:"notes,omitempty"`

	// allNodes and podsOn (the pods on each node not finished,
	// terminating ones included) are what the scheduler's pod anti-affinity and
	// topology spread read where the plan places replicas (placement.go).
	allNodes []*corev1.Node
	podsOn   map[string][]*corev1.Pod
}

// Reader reads a pool. Kube is required; Discoverer, when set, finds
// training gangs on the pool; Weights override the annotations per model
// (namespace/name).
type Reader struct {
	Kube         kubernetes.Interface
	Discoverer   *gang.Discoverer
	GPUResources []corev1.ResourceName
	Weights      map[string]Weights
	// Listed, when set, are the cluster's nodes and pods listed once for
	// several pools (pkg/skew's inventory, one list for every GPU pool):
	// Read then lists neither. Otherwise Read lists both itself, in pages
	// of PageSize (client-go's pager; its default, 500, when 0).
	Listed   *Listed
	PageSize int64
}

// Listed are a cluster's nodes and pods, as Read reads them.
type Listed struct {
	Nodes []corev1.Node
	Pods  []corev1.Pod
}

// ListNodes lists the cluster's nodes in pages of pageSize (client-go's
// pager, k8s.io/client-go/tools/pager; its default when 0).
func ListNodes(ctx context.Context, kube kubernetes.Interface, pageSize int64) ([]corev1.Node, error) {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return kube.CoreV1().Nodes().List(ctx, opts)
	})
	p.PageSize = pageSize
	var out []corev1.Node
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if n, ok := obj.(*corev1.Node); ok {
			out = append(out, *n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return out, nil
}

// ListPods lists the pods of every namespace in pages of pageSize, as
// ListNodes lists the nodes.
func ListPods(ctx context.Context, kube kubernetes.Interface, pageSize int64) ([]corev1.Pod, error) {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	})
	p.PageSize = pageSize
	var out []corev1.Pod
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if po, ok := obj.(*corev1.Pod); ok {
			out = append(out, *po)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return out, nil
}

func (r *Reader) gpuResources() []corev1.ResourceName {
	if len(r.GPUResources) > 0 {
		return r.GPUResources
	}
	return gang.DefaultGPUResources
}

// Read reads the pool made of nodes.
func (r *Reader) Read(ctx context.Context, nodes []string) (*Pool, error) {
	listed := r.Listed
	if listed == nil {
		listed = &Listed{}
		var err error
		if listed.Nodes, err = ListNodes(ctx, r.Kube, r.PageSize); err != nil {
			return nil, err
		}
		if listed.Pods, err = ListPods(ctx, r.Kube, r.PageSize); err != nil {
			return nil, err
		}
	}
	nodeList := corev1.NodeList{Items: listed.Nodes}
	podList := corev1.PodList{Items: listed.Pods}
	inPool := map[string]bool{}
	for _, n := range nodes {
		inPool[n] = true
	}
	byName := map[string]*corev1.Node{}
	for i := range nodeList.Items {
		byName[nodeList.Items[i].Name] = &nodeList.Items[i]
	}
	pool := &Pool{podsOn: map[string][]*corev1.Pod{}}
	for i := range nodeList.Items {
		pool.allNodes = append(pool.allNodes, &nodeList.Items[i])
	}
	drained := map[string]bool{}
	// The models a drained node held (recorded by the run), so that a
	// resumed run still counts and waits for the replicas it displaced.
	displacedFrom := map[string]string{} // model -> drained node
	for _, n := range nodes {
		node := byName[n]
		if node == nil {
			return nil, fmt.Errorf("node %s not found", n)
		}
		rec := gang.ReadNodeRecord(node, r.gpuResources())
		pn := PoolNode{Name: n, GPUs: rec.GPUs, Product: nodepool.GPUProduct(node.Labels), RunID: rec.RunID, State: rec.State}
		// A node this run drained stays drained until restore; one
		// drained and restored by another run is drained again.
		pn.Drained = rec.State == gang.NodeDrained || rec.State == gang.NodeRestoring
		drained[n] = pn.Drained
		if pn.Drained {
			for _, k := range recordedModels(node, rec.RunID) {
				if _, ok := displacedFrom[k]; !ok {
					displacedFrom[k] = n
				}
			}
		}
		pool.Nodes = append(pool.Nodes, pn)
	}
	sort.Slice(pool.Nodes, func(i, j int) bool { return pool.Nodes[i].Name < pool.Nodes[j].Name })

	used := map[string]int64{}
	type rsRef struct{ ns, name string }
	var poolPods []*corev1.Pod
	namespaces := map[string]bool{}
	for i := range podList.Items {
		p := &podList.Items[i]
		if podFinished(p) {
			continue
		}
		if p.Spec.NodeName != "" {
			used[p.Spec.NodeName] += gang.PodGPUs(p, r.gpuResources())
			// Terminating pods stay: a required anti-affinity term
			// selects them until they are gone, where a spread
			// constraint leaves them out (countSelected).
			pool.podsOn[p.Spec.NodeName] = append(pool.podsOn[p.Spec.NodeName], p)
		}
		if inPool[p.Spec.NodeName] && !drained[p.Spec.NodeName] {
			poolPods = append(poolPods, p)
			namespaces[p.Namespace] = true
		}
	}
	for k := range displacedFrom {
		ns, _, _ := strings.Cut(k, "/")
		namespaces[ns] = true
	}

	// The Deployments behind the pool's pods, through their ReplicaSets.
	rsOwner := map[rsRef]string{}     // ReplicaSet -> Deployment name
	autoscaler := map[string]string{} // Deployment -> its HorizontalPodAutoscaler
	deploys := map[string]*appsv1.Deployment{}
	var pdbs []*policyv1.PodDisruptionBudget
	for _, ns := range sortedKeys(namespaces) {
		rsl, err := r.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing replicasets in namespace %s: %w", ns, err)
		}
		for _, rs := range rsl.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
				rsOwner[rsRef{ns, rs.Name}] = ref.Name
			}
		}
		dl, err := r.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing deployments in namespace %s: %w", ns, err)
		}
		for i := range dl.Items {
			d := &dl.Items[i]
			deploys[ns+"/"+d.Name] = d
		}
		hl, err := r.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err):
			pool.Notes = append(pool.Notes, fmt.Sprintf("cannot list horizontalpodautoscalers in namespace %s (%v): a model whose replicas an autoscaler sets would be surged, and the autoscaler would scale the surge away", ns, err))
		case err != nil:
			return nil, fmt.Errorf("listing horizontalpodautoscalers in namespace %s: %w", ns, err)
		default:
			for _, h := range hl.Items {
				ref := h.Spec.ScaleTargetRef
				if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group == appsv1.GroupName && ref.Kind == "Deployment" {
					autoscaler[ns+"/"+ref.Name] = h.Name
				}
			}
		}
		pl, err := r.Kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing poddisruptionbudgets in namespace %s: %w", ns, err)
		}
		for i := range pl.Items {
			pdbs = append(pdbs, &pl.Items[i])
		}
	}
	deployOf := func(p *corev1.Pod) string {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "ReplicaSet" {
			return ""
		}
		if d, ok := rsOwner[rsRef{p.Namespace, ref.Name}]; ok {
			return p.Namespace + "/" + d
		}
		return ""
	}
	idx := eviction.NewIndex(nil, nil, pdbs)
	models := map[string]*Model{}
	for _, p := range poolPods {
		key := deployOf(p)
		d := deploys[key]
		if d == nil || gang.PodGPUs(p, r.gpuResources()) == 0 {
			if !isDaemonOrMirror(p) {
				pool.OtherPods = append(pool.OtherPods, p.Namespace+"/"+p.Name)
			}
			continue
		}
		if models[key] == nil {
			m, err := r.newModel(d, idx)
			if err != nil {
				return nil, err
			}
			m.Product = nodepool.GPUProduct(byName[p.Spec.NodeName].Labels)
			m.sample = p
			models[key] = m
		}
	}
	for _, key := range sortedKeys(displacedFrom) {
		d := deploys[key]
		if models[key] != nil || d == nil {
			continue
		}
		m, err := r.newModel(d, idx)
		if err != nil {
			return nil, err
		}
		m.Product = nodepool.GPUProduct(byName[displacedFrom[key]].Labels)
		models[key] = m
	}
	for k, m := range models {
		m.Autoscaler = autoscaler[k]
	}
	// Count every pod of each model, wherever it runs.
	for i := range podList.Items {
		p := &podList.Items[i]
		if podFinished(p) || p.DeletionTimestamp != nil {
			continue
		}
		m := models[deployOf(p)]
		if m == nil {
			continue
		}
		switch {
		case p.Spec.NodeName == "":
			m.Pending++
		case inPool[p.Spec.NodeName] && !drained[p.Spec.NodeName]:
			m.OnPool[p.Spec.NodeName]++
			if podReady(p) {
				m.OnPoolReady[p.Spec.NodeName]++
			}
		case !inPool[p.Spec.NodeName] && !podReady(p):
			m.Loading++
		}
		if podReady(p) {
			m.Ready++
		}
	}
	for _, k := range sortedKeys(models) {
		pool.Models = append(pool.Models, models[k])
	}
	sort.Strings(pool.OtherPods)

	// Headroom: schedulable, Ready GPU nodes outside the pool.
	for _, n := range nodeList.Items {
		if inPool[n.Name] || n.Spec.Unschedulable || !nodeReady(&n) {
			continue
		}
		var alloc int64
		for _, res := range r.gpuResources() {
			if q, ok := n.Status.Allocatable[res]; ok {
				alloc += q.Value()
			}
		}
		if alloc == 0 {
			continue
		}
		free := alloc - used[n.Name]
		if free < 0 {
			free = 0
		}
		pool.Headroom = append(pool.Headroom, HeadroomNode{Name: n.Name, Product: nodepool.GPUProduct(n.Labels), FreeGPUs: free, node: byName[n.Name]})
	}
	sort.Slice(pool.Headroom, func(i, j int) bool { return pool.Headroom[i].Name < pool.Headroom[j].Name })

	if r.Discoverer != nil {
		var work []string
		for _, n := range pool.Nodes {
			if !n.Drained {
				work = append(work, n.Name)
			}
		}
		if len(work) > 0 {
			found, err := r.Discoverer.Discover(ctx, work)
			if err != nil {
				return nil, err
			}
			for _, g := range found.Gangs {
				pool.Gangs = append(pool.Gangs, g.Key)
			}
		}
	}
	return pool, nil
}

// newModel reads a model Deployment: replicas (before a surge recorded on
// it), GPUs per replica, weights, selector and PodDisruptionBudget.
func (r *Reader) newModel(d *appsv1.Deployment, idx *eviction.Index) (*Model, error) {
	key := d.Namespace + "/" + d.Name
	m := &Model{Key: key, Namespace: d.Namespace, Name: d.Name, OnPool: map[string]int32{}, OnPoolReady: map[string]int32{}}
	m.Desired = 1
	if d.Spec.Replicas != nil {
		m.Desired = *d.Spec.Replicas
	}
	m.Replicas = m.Desired
	m.GitOps = gitOpsManager(d)
	if rec, ok := ReadSurgeRecord(d); ok {
		m.Surged, m.SurgedBy = rec.Surge, rec.Run
		m.Replicas = max(m.Desired-rec.Surge, 0)
	}
	m.template = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	m.GPUsPerReplica = gang.PodGPUs(m.template, r.gpuResources())
	m.NoReadinessProbe = noReadinessProbe(d.Spec.Template.Spec.Containers, r.gpuResources())
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s: selector: %w", key, err)
	}
	m.Selector = sel.String()
	if w, ok := r.Weights[key]; ok {
		m.Weights = &w
	} else if w, ok, err := weightsFrom(d.Annotations, d.Spec.Template.Annotations); err != nil {
		m.WeightsProblem = fmt.Sprintf("deployment %s: %v", key, err)
	} else if ok {
		m.Weights = &w
	} else {
		m.WeightsProblem = fmt.Sprintf("model %s: no weight size: kubectl annotate deployment -n %s %s %s=<bytes, e.g. 140Gi>, or pass --weights %s=<bytes>", key, d.Namespace, d.Name, AnnWeightsBytes, key)
	}
	switch pdbs := idx.PDBsFor(m.template); len(pdbs) {
	case 0:
	case 1:
		m.pdb = pdbs[0]
		m.PDB = pdbs[0].Name
		m.PDBRule = pdbRule(pdbs[0])
	default:
		var names []string
		for _, p := range pdbs {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		m.PDB = strings.Join(names, ",")
		m.PDBProblem = fmt.Sprintf("model %s: pods selected by %s (%s): the eviction API refuses to evict them; keep one", key, cli.Plural(len(pdbs), "PodDisruptionBudget"), m.PDB)
	}
	return m, nil
}

// noReadinessProbe returns the serving containers (those asking for GPUs)
// with neither a readinessProbe nor a startupProbe. With neither, the
// kubelet counts a container Ready as soon as it has started
// (k8s.io/api@v0.37.2 core/v1 types.go, ContainerStatus.Ready: "If no
// readiness probes are specified, this field defaults to true once the
// container is fully started"), long before a model server has loaded its
// weights. A startupProbe alone holds Ready until it passes: Started
// "becomes true after startupProbe is considered successful" (the same
// file, ContainerStatus.Started), so it paces the waves as a readiness
// probe does.
func noReadinessProbe(containers []corev1.Container, res []corev1.ResourceName) []string {
	var out []string
	for _, c := range containers {
		one := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
		if gang.PodGPUs(one, res) > 0 && c.ReadinessProbe == nil && c.StartupProbe == nil {
			out = append(out, c.Name)
		}
	}
	return out
}

func pdbRule(p *policyv1.PodDisruptionBudget) string {
	switch {
	case p.Spec.MaxUnavailable != nil:
		return "maxUnavailable " + p.Spec.MaxUnavailable.String()
	case p.Spec.MinAvailable != nil:
		return "minAvailable " + p.Spec.MinAvailable.String()
	}
	return "no rule"
}

// fits reports whether a replica of the model may run on the headroom
// node: the same GPU product as its pool, its node selector and required
// node affinity, and no taint it does not tolerate.
func (m *Model) fits(h *HeadroomNode) bool {
	if m.Product != "" && h.Product != m.Product {
		return false
	}
	if m.template == nil || h.node == nil {
		return true
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(m.template).Match(h.node); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), h.node.Spec.Taints, m.template.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// The marks by which GitOps tools track the objects they apply. Argo CD:
// the argocd.argoproj.io/tracking-id annotation (annotation tracking, the
// default) or the app.kubernetes.io/instance label (label tracking; Helm
// charts often set it too), per Argo CD's "Resource Tracking" doc
// (https://argo-cd.readthedocs.io/en/release-3.3/user-guide/resource_tracking/).
// Flux: the <group>/name labels its controllers set on what they apply,
// kustomize.toolkit.fluxcd.io/name (fluxcd/kustomize-controller
// internal/controller/kustomization_controller.go at
// 00ed48765af529f23f3e0471efa55a254b9e28d8, SetOwnerLabels with group
// kustomize.toolkit.fluxcd.io) and helm.toolkit.fluxcd.io/name
// (fluxcd/helm-controller internal/postrender/origin_labels.go at
// 0b02c82ad7e8780a89a7456486a71e325b145cfd). Helm: helm install, upgrade
// and rollback annotate what they apply meta.helm.sh/release-name
// (helm.sh/helm/v4@v4.3.2 pkg/action/validate.go, setMetadataVisitor,
// called from install.go); Argo CD renders a chart with helm template,
// which does not, so a Deployment carrying it was installed by Helm, and
// its app.kubernetes.io/instance label is the chart's, not Argo CD's.
const (
	AnnHelmReleaseName     = "meta.helm.sh/release-name"
	AnnArgoCDTrackingID    = "argocd.argoproj.io/tracking-id"
	LabelArgoCDInstance    = "app.kubernetes.io/instance"
	LabelFluxKustomizeName = "kustomize.toolkit.fluxcd.io/name"
	LabelFluxHelmName      = "helm.toolkit.fluxcd.io/name"
)

// gitOpsManager names the GitOps tool that applies a Deployment, "" when
// none marks it. Either may put a surge back at the next sync (self-heal
// in Argo CD; every interval in a Flux Kustomization, and in a HelmRelease
// with drift detection enabled).
func gitOpsManager(d *appsv1.Deployment) string {
	switch {
	case d.Labels[LabelFluxKustomizeName] != "":
		return fmt.Sprintf("Flux Kustomization %s (label %s)", d.Labels[LabelFluxKustomizeName], LabelFluxKustomizeName)
	case d.Labels[LabelFluxHelmName] != "":
		return fmt.Sprintf("Flux HelmRelease %s (label %s)", d.Labels[LabelFluxHelmName], LabelFluxHelmName)
	case d.Annotations[AnnArgoCDTrackingID] != "":
		return fmt.Sprintf("Argo CD (annotation %s %s)", AnnArgoCDTrackingID, d.Annotations[AnnArgoCDTrackingID])
	case d.Labels[LabelArgoCDInstance] != "" && d.Annotations[AnnHelmReleaseName] == "":
		return fmt.Sprintf("Argo CD application %s, if it tracks by label (label %s)", d.Labels[LabelArgoCDInstance], LabelArgoCDInstance)
	}
	return ""
}

// SurgeRecord is what a run records on a Deployment it surged, so that the
// run scales it back and restore undoes exactly that.
type SurgeRecord struct {
	Run            string `json:"run"`
	ReplicasBefore int32  `json:"replicasBefore"`
	ReplicasSet    int32  `json:"replicasSet"`
	Surge          int32  `json:"surge"`
	At             string `json:"at"`
}

// ReadSurgeRecord returns the surge recorded on a Deployment, if any.
func ReadSurgeRecord(d *appsv1.Deployment) (SurgeRecord, bool) {
	run := d.Labels[LabelSurgedByRun]
	if run == "" {
		return SurgeRecord{}, false
	}
	var rec SurgeRecord
	if err := json.Unmarshal([]byte(d.Annotations[AnnSurge]), &rec); err != nil || rec.Run != run {
		return SurgeRecord{}, false
	}
	return rec, true
}

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podReady is a pod that serves: Ready and not terminating.
func podReady(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && podutils.IsPodReady(p)
}

func nodeReady(n *corev1.Node) bool {
	ok, _ := gpucheck.NodeReady(n)
	return ok
}

func isDaemonOrMirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
