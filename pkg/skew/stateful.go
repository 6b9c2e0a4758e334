package skew

import (
	"context"
	"fmt"
	"sort"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
)

// A stateful service is a StatefulSet whose pods a PodDisruptionBudget
// covers that allows at most one disruption when the inventory is read
// (status.disruptionsAllowed 0 or 1): a quorum (etcd-like members, a
// replicated database) or a primary that one more lost member takes down.
// The plan moves the nodes that host such pods first in their pool, one at
// a time, and checks each service after each node.

// StatefulNode is a node that hosts pods of stateful services.
type StatefulNode struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Services are the stateful services with a pod on it, sorted.
	Services []StatefulService `json:"services"`
}

// StatefulService is a StatefulSet behind a PodDisruptionBudget that
// allows at most one disruption.
type StatefulService struct {
	Namespace   string `json:"namespace"`
	StatefulSet string `json:"statefulSet"`
	// PDB is the PodDisruptionBudget that covers its pods.
	PDB string `json:"pdb"`
}

// maxStatefulPDBs bounds the PodDisruptionBudgets whose pods are listed
// (one pod list per budget, in its namespace and by its selector).
const maxStatefulPDBs = 200

// statefulNodes reads, per node, the stateful services with a pod on it.
// It returns notes for what it could not read: a forbidden read names
// the verb and resource.
func (c *Collector) statefulNodes(ctx context.Context) (map[string][]StatefulService, []string) {
	const cost = "nodes that host stateful services are not moved first"
	var pdbs []policyv1.PodDisruptionBudget
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, opts)
	})
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if b, ok := obj.(*policyv1.PodDisruptionBudget); ok && b.Status.DisruptionsAllowed <= 1 && b.Spec.Selector != nil {
			pdbs = append(pdbs, *b)
		}
		return nil
	})
	if err != nil {
		if isForbidden(err) {
			return nil, []string{"listing poddisruptionbudgets (policy) in all namespaces is forbidden: " + cost}
		}
		return nil, []string{fmt.Sprintf("listing poddisruptionbudgets failed: %v; %s", err, cost)}
	}
	var notes []string
	if len(pdbs) > maxStatefulPDBs {
		notes = append(notes, fmt.Sprintf("%d PodDisruptionBudgets allow at most one disruption; the pods of the first %d only were read for stateful services", len(pdbs), maxStatefulPDBs))
		pdbs = pdbs[:maxStatefulPDBs]
	}
	out := map[string][]StatefulService{}
	for _, b := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		pods, err := c.Client.CoreV1().Pods(b.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			if isForbidden(err) {
				return nil, append(notes, fmt.Sprintf("listing pods in namespace %s is forbidden: %s", b.Namespace, cost))
			}
			return nil, append(notes, fmt.Sprintf("listing the pods of poddisruptionbudget %s/%s failed: %v; %s", b.Namespace, b.Name, err, cost))
		}
		for _, pod := range pods.Items {
			ref := metav1.GetControllerOf(&pod)
			if pod.Spec.NodeName == "" || ref == nil || ref.Kind != "StatefulSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
				continue
			}
			svc := StatefulService{Namespace: b.Namespace, StatefulSet: ref.Name, PDB: b.Name}
			if !containsService(out[pod.Spec.NodeName], svc) {
				out[pod.Spec.NodeName] = append(out[pod.Spec.NodeName], svc)
			}
		}
	}
	return out, notes
}

func containsService(ss []StatefulService, s StatefulService) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// statefulPools sorts the stateful nodes into their pools.
func statefulPools(pools []Pool, nodePool map[string]poolKey, byNode map[string][]StatefulService) {
	idx := map[poolKey]int{}
	for i, p := range pools {
		idx[poolKey{p.Name, p.Label}] = i
	}
	var nodes []string
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		k, ok := nodePool[n]
		if !ok {
			continue
		}
		i, ok := idx[k]
		if !ok {
			continue
		}
		svcs := byNode[n]
		sort.Slice(svcs, func(a, b int) bool {
			if svcs[a].Namespace != svcs[b].Namespace {
				return svcs[a].Namespace < svcs[b].Namespace
			}
			if svcs[a].StatefulSet != svcs[b].StatefulSet {
				return svcs[a].StatefulSet < svcs[b].StatefulSet
			}
			return svcs[a].PDB < svcs[b].PDB
		})
		pools[i].StatefulNodes = append(pools[i].StatefulNodes, StatefulNode{Node: n, Services: svcs})
	}
}

// serviceCheck waits until a stateful service is whole again: every
// replica of its StatefulSet available, then its PodDisruptionBudget's
// currentHealthy at least desiredHealthy (polled, since the disruption
// controller updates it after the pods). kubectl wait on the replica count
// rather than kubectl rollout status, which fails on a StatefulSet whose
// updateStrategy is OnDelete ("rollout status is only available for
// RollingUpdate strategy type": k8s.io/kubectl@v0.37.2
// pkg/polymorphichelpers/rollout_status.go, StatefulSetStatusViewer).
func serviceCheck(s StatefulService) []string {
	ns, sts, pdb := sq(s.Namespace), sq(s.StatefulSet), sq(s.PDB)
	healthy := fmt.Sprintf("kubectl -n %s get pdb %s -o jsonpath='{.status.currentHealthy} {.status.desiredHealthy}'", ns, pdb)
	return []string{
		fmt.Sprintf(`kubectl -n %s wait statefulset/%s --for=jsonpath='{.status.availableReplicas}'="$(kubectl -n %s get statefulset %s -o jsonpath='{.spec.replicas}')" --timeout=%s`, ns, sts, ns, sts, selfDrainTimeout),
		fmt.Sprintf("for i in $(seq 30); do %s | awk '{ok = ($1 >= $2)} END {exit !ok}' && break; sleep 10; done", healthy),
		fmt.Sprintf(`%s | awk '{ok = ($1 >= $2); print "pdb %s/%s: currentHealthy " $1 ", desiredHealthy " $2} END {exit !ok}'`, healthy, s.Namespace, s.PDB),
	}
}

// statefulFirst returns, for a pool step whose nodes the runbook moves one
// at a time, the words that put the stateful nodes first and the check
// blocks, one per stateful node, pasted after that node before the next.
func (r *renderer) statefulFirst(pool string) (order string, checks blocks) {
	sn := r.pools[pool].StatefulNodes
	if len(sn) == 0 {
		return "", nil
	}
	var names []string
	for _, n := range sn {
		names = append(names, n.Node)
	}
	order = fmt.Sprintf("first, in this order, the %s hosting stateful services behind PodDisruptionBudgets that allow at most one disruption (%s), each checked below before the next node; then the others", Nodes(len(sn)), strings.Join(names, " "))
	for _, n := range sn {
		var svc []string
		var lines []string
		for _, s := range n.Services {
			svc = append(svc, s.Namespace+"/"+s.StatefulSet)
			lines = append(lines, serviceCheck(s)...)
		}
		checks.cut()
		checks.add(fmt.Sprintf("# here, after %s and before the next node: its stateful services whole again (%s)", n.Node, strings.Join(svc, ", ")))
		checks.add(chain(lines...)...)
	}
	return order, checks
}

// statefulChecks returns the names of the stateful nodes and the check
// lines of every service they host, each service once.
func statefulChecks(sn []StatefulNode) (names, lines []string) {
	var seen []StatefulService
	for _, n := range sn {
		names = append(names, n.Node)
		for _, s := range n.Services {
			if !containsService(seen, s) {
				seen = append(seen, s)
			}
		}
	}
	for _, s := range seen {
		lines = append(lines, serviceCheck(s)...)
	}
	return names, lines
}

// statefulAfter is the check of every stateful service the pool hosts,
// for a pool whose nodes do not go one at a time in an order the runbook
// sets: replaced by the provider or an instance refresh in an order they
// pick (when "once the rollout ends"), or a GPU pool moved a fabric unit
// at a time (when "after each unit, before the next").
func (r *renderer) statefulAfter(pool, why, when string) []string {
	sn := r.pools[pool].StatefulNodes
	if len(sn) == 0 {
		return nil
	}
	names, lines := statefulChecks(sn)
	out := []string{fmt.Sprintf("# here, %s: the stateful services behind PodDisruptionBudgets that allow at most one disruption, on %s (%s), whole again; %s", when, Nodes(len(sn)), strings.Join(names, " "), why)}
	return append(out, chain(lines...)...)
}

// statefulEachBatch is the check of a pool's stateful services for a pool
// that a provider or an instance refresh (who) replaces in batches it
// sizes and orders: a loop that, each time another node of the pool
// reports the step's version, waits until every such service is whole
// again, and stops at the first that is not, so that the reader stops the
// rollout before it drains another of the service's members. first says
// what the step did to put the stateful nodes first ("" when the provider
// leaves no choice). The cost, said in the block: a member evicted from
// one old node may be scheduled onto another old node and be evicted again
// when that one's turn comes, so a service can lose a member once for
// each old node it lands on; the provider's drain evicts through the
// PodDisruptionBudget, so no more go at once than it allows.
func (r *renderer) statefulEachBatch(s Step, sel, who, first string) []string {
	sn := r.pools[s.Pool].StatefulNodes
	if len(sn) == 0 {
		return nil
	}
	names, lines := statefulChecks(sn)
	order := fmt.Sprintf("%s picks the order and the batch, so they cannot go first one at a time", who)
	if first != "" {
		order = first
	}
	minor := strings.ReplaceAll(s.To, ".", `\.`)
	versions := fmt.Sprintf(`kubectl get nodes -l %s -o jsonpath='{range .items[*]}{.status.nodeInfo.kubeletVersion}{"\n"}{end}'`, sel)
	return []string{
		fmt.Sprintf("# here, after each batch of the rollout: the stateful services behind PodDisruptionBudgets that allow at most one disruption, on %s (%s), whole again; %s. The cost of that order: a member evicted from one old node may be scheduled onto another old node and be evicted again at its turn, so a service can lose a member once for each old node it lands on (the drain evicts through the PodDisruptionBudget, so never more at once than it allows)", Nodes(len(sn)), strings.Join(names, " "), order),
		fmt.Sprintf("# start this loop in a second terminal when the rollout starts (pasted after the rollout, it checks once): it checks each time another node of the pool reports v%s, ends when every node does, and fails at the first service not whole again: then stop the rollout there and follow this step's rollback", s.To),
		"SEEN=0; WHOLE=1",
		"while :; do",
		fmt.Sprintf("  NEW=$(%s | awk '/^v%s\\./ {n++} END {print n+0}'); ALL=$(kubectl get nodes -l %s -o name | wc -l)", versions, minor, sel),
		fmt.Sprintf(`  if [ "$NEW" -gt "$SEEN" ]; then SEEN=$NEW; echo "$NEW of $ALL nodes of the pool at v%s: checking the stateful services"; { %s; } || { WHOLE=0; break; }; fi`, s.To, strings.Join(lines, " && ")),
		`  if [ "$NEW" -ge "$ALL" ]; then break; fi; sleep 30`,
		"done",
		`[ "$WHOLE" = 1 ] || { echo "a stateful service is not whole again: stop the rollout here and follow this step's rollback" >&2; false; }`,
	}
}
