package eviction

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Index is the read-only view of a cluster the Evaluator works on: nodes,
// pods by node, and PodDisruptionBudgets by namespace with their selectors
// parsed once. Build it with NewIndex from list results; it never talks to
// the API server.
type Index struct {
	nodes      map[string]*corev1.Node
	podsByNode map[string][]*corev1.Pod
	podsByNS   map[string][]*corev1.Pod
	pdbsByNS   map[string][]*pdbEntry
	unknownNS  map[string]string
	// byLabel finds PDBs by one of their matchLabels pairs, so matching a
	// pod costs a lookup per pod label instead of a scan of every PDB in
	// the namespace; scan holds the PDBs without matchLabels.
	byLabel  map[string]map[labelPair][]*pdbEntry
	scan     map[string][]*pdbEntry
	selected map[*pdbEntry]int
}

type labelPair struct{ key, value string }

type pdbEntry struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
	// empty is true for a present but empty selector, which selects every
	// pod of the namespace in policy/v1.
	empty bool
}

// NewIndex indexes the given objects. The slices are not copied; the
// objects must not change while the Index is in use.
func NewIndex(nodes []*corev1.Node, pods []*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) *Index {
	idx := &Index{
		nodes:      make(map[string]*corev1.Node, len(nodes)),
		podsByNode: make(map[string][]*corev1.Pod, len(nodes)),
		podsByNS:   map[string][]*corev1.Pod{},
		pdbsByNS:   map[string][]*pdbEntry{},
		unknownNS:  map[string]string{},
		byLabel:    map[string]map[labelPair][]*pdbEntry{},
		scan:       map[string][]*pdbEntry{},
		selected:   map[*pdbEntry]int{},
	}
	for _, n := range nodes {
		idx.nodes[n.Name] = n
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			idx.podsByNode[p.Spec.NodeName] = append(idx.podsByNode[p.Spec.NodeName], p)
		}
		idx.podsByNS[p.Namespace] = append(idx.podsByNS[p.Namespace], p)
	}
	for _, ps := range idx.podsByNode {
		sortPods(ps)
	}
	for _, b := range pdbs {
		// The API server skips a PDB whose selector does not parse: it
		// matches nothing. A nil selector matches nothing in policy/v1.
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			sel = labels.Nothing()
		}
		e := &pdbEntry{pdb: b, selector: sel,
			empty: b.Spec.Selector != nil && len(b.Spec.Selector.MatchLabels) == 0 && len(b.Spec.Selector.MatchExpressions) == 0}
		idx.pdbsByNS[b.Namespace] = append(idx.pdbsByNS[b.Namespace], e)
	}
	for ns, es := range idx.pdbsByNS {
		sort.Slice(es, func(i, j int) bool { return es[i].pdb.Name < es[j].pdb.Name })
		for _, e := range es {
			if e.pdb.Spec.Selector == nil || len(e.pdb.Spec.Selector.MatchLabels) == 0 {
				idx.scan[ns] = append(idx.scan[ns], e)
				continue
			}
			// Any one pair will do: a pod the PDB selects carries all of them.
			keys := make([]string, 0, len(e.pdb.Spec.Selector.MatchLabels))
			for k := range e.pdb.Spec.Selector.MatchLabels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			lp := labelPair{keys[0], e.pdb.Spec.Selector.MatchLabels[keys[0]]}
			m := idx.byLabel[ns]
			if m == nil {
				m = map[labelPair][]*pdbEntry{}
				idx.byLabel[ns] = m
			}
			m[lp] = append(m[lp], e)
		}
	}
	return idx
}

// SetPDBsUnknown records that the PodDisruptionBudgets of namespace could
// not be read (why says so); the Evaluator answers OutcomeUnknown for its
// pods instead of guessing.
func (idx *Index) SetPDBsUnknown(namespace, why string) { idx.unknownNS[namespace] = why }

// Node returns the named node, or nil.
func (idx *Index) Node(name string) *corev1.Node { return idx.nodes[name] }

// Nodes returns the names of all indexed nodes, sorted.
func (idx *Index) Nodes() []string {
	out := make([]string, 0, len(idx.nodes))
	for n := range idx.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// PodsOn returns the pods bound to node, sorted by namespace and name.
func (idx *Index) PodsOn(node string) []*corev1.Pod { return idx.podsByNode[node] }

// PDBsFor returns the PodDisruptionBudgets that select pod, the way the
// eviction handler finds them: same namespace, selector matches the labels.
func (idx *Index) PDBsFor(pod *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, e := range idx.entriesFor(pod) {
		out = append(out, e.pdb)
	}
	return out
}

func (idx *Index) entriesFor(pod *corev1.Pod) []*pdbEntry {
	var out []*pdbEntry
	set := labels.Set(pod.Labels)
	for _, e := range idx.scan[pod.Namespace] {
		if e.selector.Matches(set) {
			out = append(out, e)
		}
	}
	if m := idx.byLabel[pod.Namespace]; m != nil {
		for k, v := range pod.Labels {
			for _, e := range m[labelPair{k, v}] {
				if e.selector.Matches(set) {
					out = append(out, e)
				}
			}
		}
	}
	if len(out) > 1 {
		sort.Slice(out, func(i, j int) bool { return out[i].pdb.Name < out[j].pdb.Name })
	}
	return out
}

// podsSelectedBy counts the indexed pods a PDB selects that are not
// finished, the pods the disruption controller would count.
func (idx *Index) podsSelectedBy(e *pdbEntry) int {
	if n, ok := idx.selected[e]; ok {
		return n
	}
	n := 0
	defer func() { idx.selected[e] = n }()
	for _, p := range idx.podsByNS[e.pdb.Namespace] {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if e.selector.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

func sortPods(ps []*corev1.Pod) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Namespace != ps[j].Namespace {
			return ps[i].Namespace < ps[j].Namespace
		}
		return ps[i].Name < ps[j].Name
	})
}
