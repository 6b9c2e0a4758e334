package inference

// Where a displaced or surged replica can go: a free GPU outside the pool
// on a node whose product, node affinity and taints admit it (Model.fits),
// and that the scheduler's two pod placement rules that can turn it away
// admit too: the replica's required pod anti-affinity and its topology
// spread constraints with whenUnsatisfiable DoNotSchedule. k8s.io/kubernetes
// is not a module of the suite, so the two rules are written here as the
// scheduler's plugins filter at kubernetes/kubernetes@v1.37.2:
// pkg/scheduler/framework/plugins/interpodaffinity/filtering.go
// (satisfyPodAntiAffinity, satisfyExistingPodsAntiAffinity) and
// pkg/scheduler/framework/plugins/podtopologyspread/filtering.go and
// common.go (calPreFilterState, Filter, filterTopologySpreadConstraints).

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// placement is the free GPUs outside the pool and the pods of every node,
// as the plan places replicas onto them and drains the pool's nodes.
type placement struct {
	free []HeadroomNode
	// nodes are the cluster's nodes (the topology spread's domains), the
	// pool's with the cordon's taint the run gives them.
	nodes []*corev1.Node
	// pods are the pods on each node that are not finished or
	// terminating, the replicas the plan placed included.
	pods map[string][]*corev1.Pod
	// blocked says, per model, which rule last turned a free GPU away.
	blocked map[string]string
}

func newPlacement(pool *Pool) *placement {
	pl := &placement{free: append([]HeadroomNode(nil), pool.Headroom...), pods: map[string][]*corev1.Pod{}, blocked: map[string]string{}}
	inPool := map[string]bool{}
	for _, n := range pool.Nodes {
		inPool[n.Name] = true
	}
	for _, n := range pool.allNodes {
		if inPool[n.Name] {
			// The run cordons the pool's nodes, and the node lifecycle
			// controller taints a cordoned node
			// node.kubernetes.io/unschedulable:NoSchedule
			// (kubernetes/kubernetes@v1.37.2
			// pkg/controller/nodelifecycle/node_lifecycle_controller.go,
			// doNoScheduleTaintingPass), which a spread constraint with
			// nodeTaintsPolicy Honor leaves out of its domains.
			c := n.DeepCopy()
			c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
			n = c
		}
		pl.nodes = append(pl.nodes, n)
	}
	for k, v := range pool.podsOn {
		pl.pods[k] = append([]*corev1.Pod(nil), v...)
	}
	return pl
}

func (pl *placement) clone() *placement {
	c := &placement{free: append([]HeadroomNode(nil), pl.free...), nodes: pl.nodes, pods: make(map[string][]*corev1.Pod, len(pl.pods)), blocked: pl.blocked}
	for k, v := range pl.pods {
		c.pods[k] = v[:len(v):len(v)]
	}
	return c
}

// why says which scheduling rule turned a free GPU away from a replica of
// the model, as a clause ("" when none did).
func (pl *placement) why(key string) string {
	if b := pl.blocked[key]; b != "" {
		return "; its " + b + " keeps replicas off free GPUs outside the pool"
	}
	return ""
}

// evict drains nodes: their pods are gone.
func (pl *placement) evict(nodes []string) {
	for _, n := range nodes {
		delete(pl.pods, n)
	}
}

// find returns the first free slot a replica of m may take, or -1.
func (pl *placement) find(m *Model) int {
	for i := range pl.free {
		h := &pl.free[i]
		if h.FreeGPUs < m.GPUsPerReplica || !m.fits(h) {
			continue
		}
		if why := pl.refuses(m, h.node); why != "" {
			pl.blocked[m.Key] = why
			continue
		}
		return i
	}
	return -1
}

// place takes a free GPU for a replica of m, first fit.
func (pl *placement) place(m *Model) bool {
	i := pl.find(m)
	if i < 0 {
		return false
	}
	pl.free[i].FreeGPUs -= m.GPUsPerReplica
	if p := m.replica(); p != nil && pl.free[i].node != nil {
		pl.pods[pl.free[i].Name] = append(pl.pods[pl.free[i].Name], p)
	}
	return true
}

// refuses says which rule keeps a replica of m off node, or "".
func (pl *placement) refuses(m *Model, node *corev1.Node) string {
	p := m.replica()
	if p == nil || node == nil {
		return ""
	}
	if why := pl.antiAffinity(p, node); why != "" {
		return why
	}
	return pl.spread(p, node)
}

// replica is a new pod of the model as the scheduler sees it: a pod the
// model runs (its labels carry the ReplicaSet's pod-template-hash, and
// the API server has merged matchLabelKeys into its selectors), else its
// template.
func (m *Model) replica() *corev1.Pod {
	if m.sample != nil {
		return m.sample
	}
	return m.template
}

// nodeOf returns the node named name, or nil.
func (pl *placement) nodeOf(name string) *corev1.Node {
	for _, n := range pl.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// antiAffinity: no pod a required anti-affinity term of p selects runs in
// the node's topology domain (a node without the term's topology key
// passes it), and p is not selected by a required anti-affinity term of a
// pod in its domain (satisfyPodAntiAffinity,
// satisfyExistingPodsAntiAffinity).
func (pl *placement) antiAffinity(p *corev1.Pod, node *corev1.Node) string {
	for _, t := range requiredAntiAffinity(p) {
		v, ok := node.Labels[t.TopologyKey]
		if !ok {
			continue
		}
		for _, n := range pl.nodes {
			if w, has := n.Labels[t.TopologyKey]; !has || w != v {
				continue
			}
			for _, q := range pl.pods[n.Name] {
				if termSelects(t, p.Namespace, q) {
					return fmt.Sprintf("required pod anti-affinity (topologyKey %s)", t.TopologyKey)
				}
			}
		}
	}
	for _, n := range pl.nodes {
		for _, q := range pl.pods[n.Name] {
			for _, t := range requiredAntiAffinity(q) {
				v, ok := n.Labels[t.TopologyKey]
				w, has := node.Labels[t.TopologyKey]
				if ok && has && v == w && termSelects(t, q.Namespace, p) {
					return fmt.Sprintf("required pod anti-affinity of pod %s/%s (topologyKey %s)", q.Namespace, q.Name, t.TopologyKey)
				}
			}
		}
	}
	return ""
}

func hasLabel(n *corev1.Node, key string) bool {
	_, ok := n.Labels[key]
	return ok
}

func requiredAntiAffinity(p *corev1.Pod) []corev1.PodAffinityTerm {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return nil
	}
	return p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

// termSelects reports whether the term of a pod in namespace ns selects q:
// q's namespace is among the term's (its own pod's namespace when it names
// none and has no namespaceSelector), and its labels match. A
// namespaceSelector is taken to select every namespace, as an empty one
// does: the plan does not read namespaces' labels, and counting more pods
// only places fewer replicas. A terminating pod is selected until it is
// gone: the scheduler's AffinityTerm.Matches has no deletion check
// (k8s.io/kube-scheduler@v0.37.2 framework/types.go), only the spread
// constraints' count skips terminating pods (countSelected).
func termSelects(t corev1.PodAffinityTerm, ns string, q *corev1.Pod) bool {
	switch {
	case t.NamespaceSelector != nil:
	case len(t.Namespaces) > 0:
		found := false
		for _, n := range t.Namespaces {
			found = found || n == q.Namespace
		}
		if !found {
			return false
		}
	default:
		if q.Namespace != ns {
			return false
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		return true // an unreadable selector: keep the replica off
	}
	return sel.Matches(labels.Set(q.Labels))
}

// spread: for each of p's topology spread constraints with
// whenUnsatisfiable DoNotSchedule, the node has the topology key, and the
// pods the constraint selects in its domain, with p, exceed the fewest in
// any domain by at most maxSkew (the fewest counts as 0 while there are
// fewer domains than minDomains). The domains are the nodes that carry
// every constraint's key and that the constraint's nodeAffinityPolicy
// (Honor by default: p's node selector and required node affinity) and
// nodeTaintsPolicy (Ignore by default) admit; matchLabelKeys take their
// values from p's labels.
func (pl *placement) spread(p *corev1.Pod, node *corev1.Node) string {
	var cs []corev1.TopologySpreadConstraint
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return ""
	}
	required := nodeaffinity.GetRequiredNodeAffinity(p)
	for _, c := range cs {
		what := fmt.Sprintf("topology spread constraint (topologyKey %s, maxSkew %d, DoNotSchedule)", c.TopologyKey, c.MaxSkew)
		val, ok := node.Labels[c.TopologyKey]
		if !ok {
			return what
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return what
		}
		if len(c.MatchLabelKeys) > 0 {
			set := labels.Set{}
			for _, k := range c.MatchLabelKeys {
				if v, ok := p.Labels[k]; ok {
					set[k] = v
				}
			}
			if len(set) > 0 {
				merged := labels.SelectorFromSet(set)
				if reqs, ok := sel.Requirements(); ok {
					merged = merged.Add(reqs...)
				}
				sel = merged
			}
		}
		counts := map[string]int{}
		for _, n := range pl.nodes {
			if !hasAllKeys(n, cs) || !includes(c, p, n, required) {
				continue
			}
			v := n.Labels[c.TopologyKey]
			counts[v] += countSelected(pl.pods[n.Name], sel, p.Namespace)
		}
		least := -1
		for _, v := range counts {
			if least < 0 || v < least {
				least = v
			}
		}
		minDomains := 1
		if c.MinDomains != nil {
			minDomains = int(*c.MinDomains)
		}
		if least < 0 || len(counts) < minDomains {
			least = 0
		}
		self := 0
		if sel.Matches(labels.Set(p.Labels)) {
			self = 1
		}
		if counts[val]+self-least > int(c.MaxSkew) {
			return what
		}
	}
	return ""
}

func hasAllKeys(n *corev1.Node, cs []corev1.TopologySpreadConstraint) bool {
	for _, c := range cs {
		if !hasLabel(n, c.TopologyKey) {
			return false
		}
	}
	return true
}

// includes applies a constraint's node inclusion policies to a domain
// node (common.go, matchNodeInclusionPolicies).
func includes(c corev1.TopologySpreadConstraint, p *corev1.Pod, n *corev1.Node, required nodeaffinity.RequiredNodeAffinity) bool {
	if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		if ok, _ := required.Match(n); !ok {
			return false
		}
	}
	if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			return false
		}
	}
	return true
}

// countSelected counts the pods of namespace ns the selector selects,
// terminating ones left out (countPodsMatchSelector).
func countSelected(pods []*corev1.Pod, sel labels.Selector, ns string) int {
	if sel.Empty() {
		return 0
	}
	n := 0
	for _, q := range pods {
		if q.DeletionTimestamp == nil && q.Namespace == ns && sel.Matches(labels.Set(q.Labels)) {
			n++
		}
	}
	return n
}
