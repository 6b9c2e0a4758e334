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

// capiMachinesOf sets MACHINES (or the variable v) to the Machines, on the
// management cluster, of the nodes listed in file that are not yet at the
// step's minor (Machine spec.version), and fails when there is none.
func (r *renderer) capiMachinesOf(v, file string, s Step) string {
	minor := strings.ReplaceAll(s.To, ".", `\.`)
	return fmt.Sprintf(`%s=$(%s -n %s get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s -o jsonpath='{range .items[*]}{.status.nodeRef.name} {.metadata.name} {.spec.version}{"\n"}{end}' | awk 'NR == FNR {n[$1]; next} ($1 in n) && NF == 3 && $3 !~ /^v%s\./ {print $2}' %s -) && test -n "$%s"`,
		v, r.kubectlMgmt(), sq(r.capiNS), sq(r.capiName), minor, file, v)
}

// capiUnits moves a held Cluster API GPU pool one fabric unit (or batch)
// at a time, in the order the rollout asks for them: the hook goes on
// every old Machine of the pool and the pool's topologies are released;
// then, for each unit in turn, the unit is the one of a Machine the
// rollout is deleting and holds at the hook (its node still runs its
// gangs), gang-drain's checkpointing drain empties it, its Machines are
// marked to be deleted first and let go of the hook in one write, and the
// block waits until they are gone. Following the rollout's own pick, never
// choosing a unit of its own, the runbook cannot leave the rollout waiting
// on a Machine whose unit it does not drain next. Once no old Machine is
// left the new nodes are validated and the gangs come back.
func (r *renderer) capiUnits(s Step, sel string) blocks {
	pool := fileSafe(s.Pool)
	nodesFile := fmt.Sprintf("pool-%s-nodes.txt", pool)
	unitFile := fmt.Sprintf("pool-%s-unit-nodes.txt", pool)
	mgmt := fmt.Sprintf("%s -n %s", r.kubectlMgmt(), sq(r.capiNS))
	machines := fmt.Sprintf("%s get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s", mgmt, sq(r.capiName))
	run := poolRun(s)
	var b blocks
	b.add(fmt.Sprintf("# Cluster API replaces this pool's Machines by a MachineDeployment rollout, which drains no Machine that carries a %s annotation until it is gone and deletes first those annotated %s (cluster-api v1.14.0): every old Machine of the pool gets the hook, so Cluster API's own drain reaches no gang before gang-drain's checkpoint; then the pool's topologies are released, and the rollout's first pick waits at the hook", strings.SplitN(capiHook, "/", 2)[0], capiDeleteFirst),
		fmt.Sprintf(`kubectl get nodes -l %s -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' > %s`, sel, nodesFile))
	b.add(chain(
		r.capiMachinesOf("MACHINES", nodesFile, s),
		fmt.Sprintf(`%s annotate machines.cluster.x-k8s.io $MACHINES %s=gpufleet --overwrite`, mgmt, capiHook))...)
	b.add(r.capiRelease(s.Pool, sel)[2:]...)
	b.cut()
	b.add("# the cost: a unit's gangs stay stopped (checkpointed) from its drain until no old Machine is left and the new nodes pass gpu-validate; the units not yet drained keep training, and the rollout's new Machines wait idle until then (a restore per unit would bring back all of the run's gangs, onto the old Machines of units still to drain)")
	// The node of a Machine being deleted: its deletionTimestamp is set.
	waiting := fmt.Sprintf(`WAITING=$(%s -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp} {.status.nodeRef.name}{"\n"}{end}' | awk 'NF == 2 {print $2}' | grep -Fx -f %s)`, machines, nodesFile)
	none := `{ [ -n "$WAITING" ] || { echo "no Machine of the pool is being deleted yet: paste this block again in a minute (once no old Machine is left, go on below)" >&2; false; }; }`
	var pick []string
	var unitSel string
	if u := r.pools[s.Pool].Units; u != nil {
		unitSel = fmt.Sprintf(`"%s,%s=$UNIT"`, sel, u.Label)
		b.add(fmt.Sprintf("# one fabric unit at a time, by %s, in the order the rollout picks them: the unit of a Machine it is deleting and holds at the hook; for each unit in turn, until no old Machine is left:", u.Label))
		pick = []string{"UNIT=", waiting, none,
			fmt.Sprintf(`UNIT=$(kubectl get node $(echo "$WAITING" | head -1) -o jsonpath='{.metadata.labels.%s}')`, strings.ReplaceAll(u.Label, ".", `\.`)),
			fmt.Sprintf(`{ [ -n "$UNIT" ] || { echo "node $(echo "$WAITING" | head -1) has no %s label: drain it alone with NODES set to it, then go on" >&2; false; }; }`, u.Label),
			fmt.Sprintf(`kubectl get nodes -l %s -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' > %s`, unitSel, unitFile),
		}
	} else {
		b.add("# no rack or rail label on the nodes: the batch is the nodes of the Machines the rollout is deleting and holds at the hook; for each batch in turn, until no old Machine is left:")
		pick = []string{"NODES=", waiting, none, `NODES=$(echo $WAITING)`, fmt.Sprintf(`printf '%%s\n' $NODES > %s`, unitFile)}
	}
	drain, picked := r.gangDrain(unitSel, run), `[ -n "$UNIT" ]`
	if unitSel == "" {
		drain, picked = fmt.Sprintf("kubectl gang-drain run $NODES --run-id %s --timeout %s", run, selfDrainTimeout), `[ -n "$NODES" ]`
	}
	// pdb-blockers informs (it exits 1 on any blocker, which gang-drain's
	// own time limit may still clear), so it stands between the chains.
	b.add(chain(pick...)...)
	b.add(r.unitPDB(unitSel))
	b.add(chain(picked,
		drain,
		r.capiMachinesOf("UNIT_MACHINES", unitFile, s),
		fmt.Sprintf(`%s annotate machines.cluster.x-k8s.io $UNIT_MACHINES %s=gpufleet %s-`, mgmt, capiDeleteFirst, capiHook),
		fmt.Sprintf("%s wait machines.cluster.x-k8s.io $UNIT_MACHINES --for=delete --timeout=%s", mgmt, selfDrainTimeout))...)
	b.cut()
	b.add(fmt.Sprintf("%s get machinedeployments.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s -o wide   # no old Machine left: wait until every replica is updated", mgmt, sq(r.capiName)),
		fmt.Sprintf("clusterctl describe cluster %s -n %s --kubeconfig-context %s", sq(r.capiName), sq(r.capiNS), sq(phMgmt)))
	b.add(reactivate(run, validateCmd(sel, s))...)
	return b
}

// capiUnhook takes the runbook's pre-drain hook off the pool's Machines
// that keep it (those of units not drained when the step stopped), so that
// a later deletion of them is not held for ever; only once gang-drain has
// drained them under the step's run, since the hook is what keeps Cluster
// API's own drain, which knows no checkpoint, off their gangs while the
// rollout is unfinished.
func (r *renderer) capiUnhook(s Step) []string {
	return append([]string{
		"# the pre-drain hook the step put on the pool's old Machines holds any deletion of them, and keeps Cluster API's own drain off their gangs: it comes off those that keep it only once gang-drain has drained the pool under the step's run:",
	}, chain(
		fmt.Sprintf("kubectl gang-drain run -l %s --run-id %s --timeout %s", r.selector(s.Pool), poolRun(s), selfDrainTimeout),
		fmt.Sprintf("%s -n %s annotate machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s %s-", r.kubectlMgmt(), sq(r.capiNS), sq(r.capiName), capiHook))...)
}
