package skew

import (
	"fmt"
	"strings"
)

// The order in which a Cluster API MachineDeployment rollout replaces a GPU
// pool's Machines, set from the runbook (kubernetes-sigs/cluster-api
// v1.14.0):
//   - The rollout scales the old MachineSet down
//     (core/reconcilers/machinedeployment/machinedeployment_rollout_rollingupdate.go,
//     reconcileOldMachineSetsRollingUpdate), and the MachineSet picks the
//     Machines it deletes by its deletion order: a Machine already being
//     deleted first (mustDelete), then one annotated
//     cluster.x-k8s.io/delete-machine (shouldDeleteFirst), whatever the
//     order (Random, Newest, Oldest)
//     (core/reconcilers/machineset/machineset_deletion_order.go;
//     DeleteMachineAnnotation in api/core/v1beta2/common_types.go: "given
//     priority for deletion when KCP or a machineset scales down").
//   - A Machine being deleted that carries an annotation with the prefix
//     pre-drain.delete.hook.machine.cluster.x-k8s.io is neither cordoned
//     nor drained until every such annotation is gone ("These hooks will
//     prevent removal of draining the associated node until all are
//     removed": PreDrainDeleteHookAnnotationPrefix, api/core/v1beta2/machine_types.go;
//     the check comes before the drain in reconcileDelete,
//     core/reconcilers/machine/machine_controller.go).
//
// So every Machine of the pool at an older version gets the hook before the
// rollout starts, and Cluster API's own drain (which knows no gangs or
// checkpoints) reaches none of them; once gang-drain has emptied a unit,
// that unit's Machines get delete-machine and lose the hook in one write,
// so the rollout deletes them before any other. A Machine the rollout
// picks from a unit not yet drained (when its maxSurge or maxUnavailable
// is wider than the units drained so far) waits at the hook, still
// running its gangs, until its unit's turn.

// capiHook is the runbook's pre-drain hook annotation on Machines.
const capiHook = "pre-drain.delete.hook.machine.cluster.x-k8s.io/gpufleet-gang-drain"

// capiDeleteFirst is Cluster API's delete-machine annotation.
const capiDeleteFirst = "cluster.x-k8s.io/delete-machine"

// capiOldMachines sets the variable v to the Machines, on the management
// cluster, of the nodes listed in file that are not yet at the step's
// minor (Machine spec.version); empty when there is none.
func (r *renderer) capiOldMachines(v, file string, s Step) string {
	minor := strings.ReplaceAll(s.To, ".", `\.`)
	return fmt.Sprintf(`%s=$(%s -n %s get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s -o jsonpath='{range .items[*]}{.status.nodeRef.name} {.metadata.name} {.spec.version}{"\n"}{end}' | awk 'NR == FNR {n[$1]; next} ($1 in n) && NF == 3 && $3 !~ /^v%s\./ {print $2}' %s -)`,
		v, r.kubectlMgmt(), sq(r.capiNS), sq(r.capiName), minor, file)
}

// capiMachinesOf is capiOldMachines, failing when there is none.
func (r *renderer) capiMachinesOf(v, file string, s Step) string {
	return fmt.Sprintf(`%s && test -n "$%s"`, r.capiOldMachines(v, file, s), v)
}

// capiUnhooked fails, naming them, when a Machine of the nodes listed in
// file is not yet at the step's minor and lacks the runbook's pre-drain
// hook: released, the rollout could pick it, and Cluster API's own drain
// would reach its gangs before any checkpoint.
func (r *renderer) capiUnhooked(file string, s Step) string {
	minor := strings.ReplaceAll(s.To, ".", `\.`)
	key := strings.ReplaceAll(capiHook, ".", `\.`)
	return fmt.Sprintf(`UNHOOKED=$(%s -n %s get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s -o jsonpath='{range .items[*]}{.status.nodeRef.name} {.metadata.name} {.spec.version} hook={.metadata.annotations.%s}{"\n"}{end}' | awk 'NR == FNR {n[$1]; next} ($1 in n) && NF == 4 && $3 !~ /^v%s\./ && $4 == "hook=" {print $2}' %s -) && `+
		`{ [ -z "$UNHOOKED" ] || { echo "Machines of the pool at an older version lack the %s annotation: "$UNHOOKED"; the topologies stay held: annotate them (or paste this block again) before the rollout starts" >&2; false; }; }`,
		r.kubectlMgmt(), sq(r.capiNS), sq(r.capiName), key, minor, file, capiHook)
}

// capiWaitPerMachine is how long the unit block waits for each Machine of
// a unit to be deleted. The rollout replaces the Machines it deletes one
// new Machine at a time (a held Machine counts against maxSurge, so the
// rollout waits on it and makes no other), so a unit of k Machines takes
// k cycles of a new GPU Machine's provisioning and join: an hour a cycle
// is generous for a cloud instance and covers most bare-metal installs.
const capiWaitPerMachine = 1 // hours

// capiUnits moves a held Cluster API GPU pool one fabric unit (or batch)
// at a time, in the order the rollout asks for them: the hook goes on
// every old Machine of the pool and, once every one carries it, the pool's
// topologies are released; then, for each unit in turn, the unit is the
// one of a Machine the rollout is deleting and holds at the hook (its node
// still runs its gangs), gang-drain's checkpointing drain empties it, its
// Machines are marked to be deleted first and let go of the hook in one
// write, and the block waits until they are gone. Following the rollout's
// own pick, never choosing a unit of its own, the runbook cannot leave the
// rollout waiting on a Machine whose unit it does not drain next. A node
// without the unit label is drained alone, by name, under the same run.
// Once no old Machine is left the new nodes are validated and the gangs
// come back.
func (r *renderer) capiUnits(s Step, sel string) blocks {
	pool := fileSafe(s.Pool)
	nodesFile := fmt.Sprintf("pool-%s-nodes.txt", pool)
	unitFile := fmt.Sprintf("pool-%s-unit-nodes.txt", pool)
	mgmt := fmt.Sprintf("%s -n %s", r.kubectlMgmt(), sq(r.capiNS))
	machines := fmt.Sprintf("%s get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s", mgmt, sq(r.capiName))
	run := poolRun(s)
	var b blocks
	b.add(fmt.Sprintf("# Cluster API replaces this pool's Machines by a MachineDeployment rollout, which drains no Machine that carries a %s annotation until it is gone and deletes first those annotated %s (cluster-api v1.14.0): every old Machine of the pool gets the hook, so Cluster API's own drain reaches no gang before gang-drain's checkpoint; only once every one carries it are the pool's topologies released, and the rollout's first pick waits at the hook", strings.SplitN(capiHook, "/", 2)[0], capiDeleteFirst),
		"# undo the defer-upgrade of the MachineDeployment topologies whose Machines run this pool's nodes (Nodes do not carry it: Cluster API syncs only node-role.kubernetes.io/, node-restriction.kubernetes.io/ and node.cluster.x-k8s.io labels to them): the topology controller rolls them to the Cluster's version (on the management cluster):")
	b.add(chain(
		r.poolNodesFile(sel, nodesFile),
		r.capiMachinesOf("MACHINES", nodesFile, s),
		fmt.Sprintf(`%s annotate machines.cluster.x-k8s.io $MACHINES %s=gpufleet --overwrite`, mgmt, capiHook),
		r.capiUnhooked(nodesFile, s),
		r.capiTopologiesOf(nodesFile),
		r.capiReleaseLoop())...)
	b.cut()
	b.add(fmt.Sprintf("# the cost: the rollout replaces the Machines strictly one after another (a Machine held at the hook counts against maxSurge, so no other new Machine is made meanwhile): a drained unit of k Machines sits cordoned for k replacement cycles, and its gangs stay stopped (checkpointed) until no old Machine of the pool is left and the new nodes pass gpu-validate, so the earliest-drained gangs stay stopped for the pool's whole serial time (%d Machines, one cycle each); the units not yet drained keep training, and the new Machines wait idle until then (a restore per unit would bring back all of the run's gangs, onto the old Machines of units still to drain)", r.pools[s.Pool].Nodes))
	// The node of a Machine being deleted: its deletionTimestamp is set.
	// grep finds none while the rollout deletes no Machine of the pool,
	// which is no failure of the block: the test after it says so.
	left := r.capiOldMachines("LEFT", nodesFile, s)
	done := `{ [ -n "$LEFT" ] || { echo "no Machine of the pool is left at an older version: the rollout is done, go on below" >&2; false; }; }`
	waiting := fmt.Sprintf(`WAITING=$(%s -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp} {.status.nodeRef.name}{"\n"}{end}' | awk 'NF == 2 {print $2}' | grep -Fx -f %s || true)`, machines, nodesFile)
	none := `{ [ -n "$WAITING" ] || { echo "no Machine of the pool is being deleted yet: paste this block again in a minute" >&2; false; }; }`
	pick := []string{"NODES=", left, done, waiting, none, `NODE=$(echo "$WAITING" | head -1)`}
	if u := r.pools[s.Pool].Units; u != nil {
		unitSel := fmt.Sprintf(`"%s,%s=$UNIT"`, sel, u.Label)
		b.add(fmt.Sprintf("# one fabric unit at a time, by %s, in the order the rollout picks them: the unit of a Machine it is deleting and holds at the hook (a node without the label is drained alone, by name, under the same run); paste this block once per unit until it says to go on below:", u.Label))
		pick = append(pick,
			fmt.Sprintf(`UNIT=$(kubectl get node "$NODE" -o jsonpath='{.metadata.labels.%s}')`, strings.ReplaceAll(u.Label, ".", `\.`)),
			fmt.Sprintf(`{ if [ -n "$UNIT" ]; then kubectl get nodes -l %s -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' > %s; else echo "node $NODE has no %s label: it is drained alone, by name, under the same run" >&2; echo "$NODE" > %s; fi; }`, unitSel, unitFile, u.Label, unitFile))
	} else {
		b.add("# no rack or rail label on the nodes: the batch is the nodes of the Machines the rollout is deleting and holds at the hook; paste this block once per batch until it says to go on below:")
		pick = append(pick, `printf '%s\n' $WAITING > `+unitFile)
	}
	pick = append(pick, "NODES=$(cat "+unitFile+")", `test -n "$NODES"`)
	// pdb-blockers informs (it exits 1 on any blocker, which gang-drain's
	// own time limit may still clear), so it stands between the chains;
	// it runs only once a unit was picked (with no node it refuses).
	b.add(chain(pick...)...)
	b.add(`[ -z "$NODES" ] || ` + r.unitPDB(""))
	b.add(fmt.Sprintf("# the wait: %dh for each Machine of the unit, replaced one after another; pasting the block again is safe (it picks the same unit while its Machines are being deleted, and the drain, the annotate and the wait go on from where they are)", capiWaitPerMachine))
	b.add(chain(`[ -n "$NODES" ]`,
		r.gangDrain("", run),
		r.capiMachinesOf("UNIT_MACHINES", unitFile, s),
		fmt.Sprintf(`%s annotate machines.cluster.x-k8s.io $UNIT_MACHINES %s=gpufleet %s- --overwrite`, mgmt, capiDeleteFirst, capiHook),
		fmt.Sprintf(`%s wait machines.cluster.x-k8s.io $UNIT_MACHINES --for=delete --timeout=$(( $(echo $UNIT_MACHINES | wc -w) * %d ))h`, mgmt, capiWaitPerMachine))...)
	b.cut()
	b.add(fmt.Sprintf("%s get machinedeployments.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s -o wide   # no old Machine left: wait until every replica is updated", mgmt, sq(r.capiName)),
		fmt.Sprintf("clusterctl describe cluster %s -n %s --kubeconfig-context %s", sq(r.capiName), sq(r.capiNS), sq(phMgmt)))
	b.add(reactivate(run, validateCmd(sel, s))...)
	return b
}

// capiStatefulFirst puts a held Cluster API pool's nodes that host
// stateful services first in its rollout: before the topologies are
// released, their Machines get cluster.x-k8s.io/delete-machine, which the
// old MachineSet's scale-down deletes before any other Machine whatever
// its deletion order (shouldDeleteFirst, cluster-api v1.14.0
// core/reconcilers/machineset/machineset_deletion_order.go). It returns
// the lines before the release and the annotate, which the release loop
// is chained to; nil and "" when the pool has no such node, is not held
// or is a GPU pool (whose units set the order: capiUnits).
func (r *renderer) capiStatefulFirst(s Step) (notes []string, mark string) {
	sn := r.pools[s.Pool].StatefulNodes
	if r.prov != ProviderCAPI || !r.capiHeld || len(sn) == 0 || r.gpuPool(s.Pool) || r.controlPlanePool(s.Pool) {
		return nil, ""
	}
	var names []string
	for _, n := range sn {
		names = append(names, sq(n.Node))
	}
	file := fmt.Sprintf("pool-%s-stateful-nodes.txt", fileSafe(s.Pool))
	return []string{
			fmt.Sprintf("# the nodes that host stateful services go first: their Machines get %s, which the rollout's scale-down of the old MachineSet deletes before any other whatever its deletion order (cluster-api v1.14.0 machineset_deletion_order.go); the release of the topologies below is chained to that annotate (none left at an older version: nothing to mark):", capiDeleteFirst),
			fmt.Sprintf(`printf '%%s\n' %s > %s`, strings.Join(names, " "), file),
		},
		r.capiOldMachines("STATEFUL_MACHINES", file, s) + fmt.Sprintf(` && { [ -z "$STATEFUL_MACHINES" ] || %s -n %s annotate machines.cluster.x-k8s.io $STATEFUL_MACHINES %s=gpufleet --overwrite; }`, r.kubectlMgmt(), sq(r.capiNS), capiDeleteFirst)
}
