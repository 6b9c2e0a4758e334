package skew

import (
	"fmt"
	"sort"
	"strings"
)

// How a provider rolls a pool by itself once the control plane moves.
type rollout int

const (
	rollNone rollout = iota
	// rollCAPI: the topology controller rolls every MachineDeployment to
	// spec.topology.version after the control plane unless its topology
	// carries topology.cluster.x-k8s.io/defer-upgrade
	// (kubernetes-sigs/cluster-api v1.14.0 api/core/v1beta2/common_types.go,
	// ClusterTopologyDeferUpgradeAnnotation, read by
	// exp/topology/desiredstate/desired_state.go).
	rollCAPI
	// rollKarpenter: a NodeClass whose amiSelectorTerms use an alias
	// resolves the AMI for the control plane's version, so every node
	// drifts when the control plane moves, even on a version-pinned alias;
	// an AMI id does not move ("Pinning AMIs",
	// https://karpenter.sh/docs/tasks/managing-amis/, karpenter-provider-aws
	// website at v1.14, read 2026-09-20).
	rollKarpenter
	// rollAutoMode: EKS Auto Mode replaces nodes after the control plane
	// is upgraded (https://docs.aws.amazon.com/eks/latest/userguide/auto-upgrade.html);
	// a NodePool disruption budget of 0 for the Drifted reason holds the
	// drift, not the 21-day expiry
	// (https://karpenter.sh/docs/concepts/disruption/#nodepool-disruption-budgets),
	// both read 2026-09-20.
	rollAutoMode
	// rollGKE: node auto-upgrade is on by default and follows the control
	// plane; a maintenance exclusion of scope no_minor_or_node_upgrades
	// holds every node pool of the cluster and lets manual upgrades through
	// (https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-upgrades,
	// https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions;
	// the scope's meaning as the Kubernetes Engine v1 API states it,
	// MaintenanceExclusionOptions.Scope NO_MINOR_OR_NODE_UPGRADES, read
	// 2026-09-20).
	rollGKE
)

// rolls says how the provider rolls a pool on its own. Cluster API and
// GKE are decided from the provider, not from the pool's label: Cluster
// API syncs only node-role.kubernetes.io/, node-restriction.kubernetes.io/
// and node.cluster.x-k8s.io labels from Machines to Nodes by default
// (docs/proposals/20220927-labels-and-annotations-sync-between-machine-and-nodes.md,
// kubernetes-sigs/cluster-api v1.14.0), and a ClusterClass MachineDeployment
// does not even carry cluster.x-k8s.io/deployment-name
// (exp/topology/desiredstate/desired_state.go, same tag), so a stock
// cluster's Nodes do not say which MachineDeployment they belong to; GKE
// auto-upgrades every node pool whatever label grouped the nodes here.
func (r *renderer) rolls(pool string) rollout {
	pl, ok := r.pools[pool]
	if !ok {
		return rollNone
	}
	switch r.prov {
	case ProviderCAPI:
		if !r.controlPlanePool(pool) && r.capiWorkers() {
			return rollCAPI
		}
	case ProviderEKS:
		if pl.Label == labelKarpenterPool {
			if pl.AutoModeNodes > 0 {
				if autoModeBuiltin(pool) {
					return rollNone
				}
				return rollAutoMode
			}
			return rollKarpenter
		}
	case ProviderGKE:
		return rollGKE
	}
	return rollNone
}

// capiWorkers reports whether the Cluster has MachineDeployment topologies
// the topology controller would roll with the control plane: read from
// the Cluster's spec.topology.workers.machineDeployments, or not read (a
// report saved before they were, a provider chosen with --provider), in
// which case the hold reads them when it runs.
func (r *renderer) capiWorkers() bool {
	c, ok := capiCluster(&r.pf)
	return !ok || !c.WorkersRead || len(c.MachineDeployments) > 0
}

// capiTopologies are the Cluster's MachineDeployment topologies, when read.
func (r *renderer) capiTopologies() []string {
	if c, ok := capiCluster(&r.pf); ok && c.WorkersRead {
		return c.MachineDeployments
	}
	return nil
}

const labelKarpenterPool = "karpenter.sh/nodepool"

// Cluster API's hold of one MachineDeployment topology and the label that
// names a MachineDeployment's topology: "If the annotation is set on a
// MachineDeployment topology in Cluster.spec.topology.workers, the
// Kubernetes upgrade for this MachineDeployment topology is deferred. It
// doesn't affect other MachineDeployment topologies"
// (kubernetes-sigs/cluster-api api module v1.14.0,
// api/core/v1beta2/common_types.go, ClusterTopologyDeferUpgradeAnnotation;
// hold-upgrade-sequence there holds every later topology too, which a
// per-pool release cannot use).
const (
	CAPIDeferUpgradeAnnotation  = "topology.cluster.x-k8s.io/defer-upgrade"
	CAPITopologyDeploymentLabel = "topology.cluster.x-k8s.io/deployment-name"
)

// insertHolds puts a hold-rollouts step before each control-plane step that
// the provider would follow with pools on its own, holding each such pool
// that has a step of its own later; the pool's step releases it. On
// Cluster API the hold covers every MachineDeployment topology of the
// Cluster, as read from it, and comes before the pools' catch-up steps
// too where a GPU pool is among them (capiCatchUpHold).
func (r *renderer) insertHolds(p *Plan) {
	later := map[string][]int{} // pool -> its node-pool step numbers
	for _, s := range p.Steps {
		if s.Phase == PhaseNodePool {
			later[s.Pool] = append(later[s.Pool], s.Number)
		}
	}
	catchUp := r.capiCatchUpHold(p.Steps)
	held := map[string]bool{}
	var steps []Step
	for _, s := range p.Steps {
		if catchUp != nil && s.Number == catchUp.first {
			// The hop's last catch-up step releases every topology
			// (capiReleaseAll), so held is left as it is: the
			// control-plane step's hold defers them again.
			steps = append(steps, Step{ControlPlane: s.ControlPlane, Phase: PhaseHold, To: s.ControlPlane, Status: StatusOK, Holds: catchUp.holds,
				Action: fmt.Sprintf("keep %s from rolling %s to the Cluster's version %s before each pool's own step", r.prov.Title(), catchUp.what, s.ControlPlane),
				Note:   fmt.Sprintf("pools %s are behind the Cluster's version, which the topology controller rolls them to on its own; each pool then moves at its own step, gang-aware, which undoes the hold", strings.Join(catchUp.pools, ", "))})
		}
		if s.Phase == PhaseNodePool {
			held[s.Pool] = false
		}
		if s.Phase == PhaseControlPlane {
			var hold []string
			for pool, nums := range later {
				if held[pool] || r.rolls(pool) == rollNone || nums[len(nums)-1] < s.Number {
					continue
				}
				hold = append(hold, pool)
				held[pool] = true
			}
			sort.Strings(hold)
			if len(hold) > 0 {
				what := poolList(hold)
				if r.prov == ProviderCAPI {
					hold = r.capiTopologies()
					what = "every MachineDeployment topology of the Cluster"
					if len(hold) > 0 {
						what = "MachineDeployment topologies " + strings.Join(hold, ", ")
					}
				}
				steps = append(steps, Step{ControlPlane: s.ControlPlane, Phase: PhaseHold, To: s.To, Status: StatusOK, Holds: hold,
					Action: fmt.Sprintf("keep %s from rolling %s when the control plane moves to %s", r.prov.Title(), what, s.To),
					Note:   "each pool then moves at its own step, gang-aware, which undoes the hold"})
			}
		}
		steps = append(steps, s)
	}
	renumber(p, steps)
}

// catchUpHold is the hold before the pools' catch-up steps.
type catchUpHold struct {
	first int      // the number of the first catch-up step
	pools []string // the pools that catch up
	holds []string // the topologies held, when read
	what  string
}

// capiCatchUpHold decides the hold of the node-pool steps that come before
// any control-plane step: pools behind the Cluster's spec.topology.version,
// brought to it first. Cluster API v1.14.0's topology controller rolls a
// MachineDeployment whose version is not the topology version as soon as
// the control plane is stable, one at a time by default, unless its
// topology is deferred (computeMachineDeploymentVersion and
// isMachineDeploymentDeferred, exp/topology/desiredstate/desired_state.go;
// the default concurrency of 1 in NewUpgradeTracker,
// exp/topology/scope/upgradetracker.go): nothing waits for the pool's own
// step, so a GPU pool among them would be rolled before its gangs stop at a
// checkpoint, and the first pool's step would roll every other pool behind
// with it. The hold goes before the first of those steps wherever a GPU
// pool is among them; each pool's step then releases its own topologies
// and the last one every topology left (capiRelease, capiReleaseAll). It
// returns nil where no such hold is needed.
func (r *renderer) capiCatchUpHold(steps []Step) *catchUpHold {
	if r.prov != ProviderCAPI {
		return nil
	}
	var h catchUpHold
	gpu := false
	for _, s := range steps {
		if s.Phase == PhaseControlPlane || s.Phase == PhaseHold {
			break
		}
		if s.Phase != PhaseNodePool || r.rolls(s.Pool) != rollCAPI {
			continue
		}
		if h.first == 0 {
			h.first = s.Number
		}
		h.pools = append(h.pools, s.Pool)
		gpu = gpu || r.gpuPool(s.Pool)
	}
	if !gpu {
		return nil
	}
	h.holds = r.capiTopologies()
	h.what = "every MachineDeployment topology of the Cluster"
	if len(h.holds) > 0 {
		h.what = "MachineDeployment topologies " + strings.Join(h.holds, ", ")
	}
	return &h
}

func poolList(pools []string) string {
	if len(pools) == 1 {
		return "pool " + pools[0]
	}
	return "pools " + strings.Join(pools, ", ")
}

// holdCommands holds the step's pools.
func (r *renderer) holdCommands(s Step) []string {
	if r.prov == ProviderCAPI {
		r.capiHeld = true
		return r.capiDeferAll(s.To, r.holdBeforePools(s))
	}
	var out []string
	for _, pool := range s.Holds {
		switch r.rolls(pool) {
		case rollKarpenter:
			out = append(out, r.karpenterPin(pool)...)
		case rollAutoMode:
			out = append(out, r.budgetHold(pool)...)
		case rollGKE:
			if !r.gkeHeld {
				out = append(out, r.gkeExclusion(true)...)
			}
		}
		r.held[pool] = true
	}
	return out
}

// release undoes a pool's hold at its step; GKE's exclusion covers the
// whole cluster and is lifted after the last held pool's step, Cluster
// API's defers are released by the pool's step itself (capiRelease).
func (r *renderer) release(pool string) []string {
	if !r.held[pool] {
		return nil
	}
	r.held[pool] = false
	if r.rolls(pool) == rollKarpenter {
		return r.karpenterUnpin(pool)
	}
	return nil
}

// releaseLast lifts GKE's exclusion once no held pool is left.
func (r *renderer) releaseLast() []string {
	if !r.gkeHeld {
		return nil
	}
	for pool, h := range r.held {
		if h && r.rolls(pool) == rollGKE {
			return nil
		}
	}
	return r.gkeExclusion(false)
}

// deferValue is the value of the defer-upgrade annotation this runbook
// sets; Cluster API reads only the annotation's presence, the value lets
// the control-plane step check that every topology carries it.
const deferValue = "gpufleet-upgrade"

// capiGet reads the Cluster on the management cluster.
func (r *renderer) capiGet(jsonpath string) string {
	return fmt.Sprintf("%s -n %s get cluster.cluster.x-k8s.io %s -o jsonpath='%s'", r.kubectlMgmt(), sq(r.capiNS), sq(r.capiName), jsonpath)
}

// capiApplyDefer sets (or, with set false, removes) the defer-upgrade
// annotation on the MachineDeployment topology "$MD" with server-side
// apply. The topology's machineDeployments are a list map keyed by name
// (+listType=map, +listMapKey=name in api/core/v1beta1 and v1beta2
// cluster_types.go), so a partial Cluster changes that one entry; each
// topology has a field manager of its own, so that applying it again
// without the annotation removes what that manager set on that entry and
// nothing else (a manager that applied several entries would drop the
// others when it applies one).
//
// The removal applies the Cluster with no spec under that manager: it
// releases every field the manager owned, the list entry's key included
// (server-side apply removes a field when its last manager lets go of it,
// and an entry a manager applied without its annotation would stay
// co-owned by it, so that a later apply by the cluster's own manager that
// drops the pool would leave a bare {name} entry, which the schema
// refuses for want of class).
func (r *renderer) capiApplyDefer(set bool) string {
	if !set {
		return fmt.Sprintf(`printf 'apiVersion: cluster.x-k8s.io/%s\nkind: Cluster\nmetadata: {name: %s, namespace: %s}\n' | %s apply --server-side --field-manager="gpufleet-defer-$MD" -f -`,
			r.capiAPI, r.capiName, r.capiNS, r.kubectlMgmt())
	}
	return fmt.Sprintf(`printf 'apiVersion: cluster.x-k8s.io/%s\nkind: Cluster\nmetadata: {name: %s, namespace: %s}\nspec: {topology: {workers: {machineDeployments: [{name: %%s, metadata: {annotations: {%s: %s}}}]}}}\n' "$MD" | %s apply --server-side --field-manager="gpufleet-defer-$MD" -f -`,
		r.capiAPI, r.capiName, r.capiNS, CAPIDeferUpgradeAnnotation, deferValue, r.kubectlMgmt())
}

// capiAddonsHoldManager is the field manager of the add-on hold.
const capiAddonsHoldManager = "gpufleet-addons-hold"

// capiAddonsHold holds (or, with set false, releases) KubeadmControlPlane
// off kube-proxy and CoreDNS: it puts both back at its version on every
// reconcile, at least every 10 minutes (cluster-api v1.14.0
// controlplane/kubeadm/pkg/workload_cluster.go UpdateKubeProxyImageInfo,
// workload_cluster_coredns.go UpdateCoreDNS), so an add-on rolled back
// without the hold rolls forward again within minutes. The skip
// annotations (controlplane.cluster.x-k8s.io/skip-kube-proxy and
// skip-coredns, api/controlplane/kubeadm/v1beta2) reach the
// KubeadmControlPlane from the topology's controlPlane metadata, applied
// under a field manager of their own; the release applies the Cluster
// with no spec under it, letting go of both.
func (r *renderer) capiAddonsHold(set bool) string {
	spec := ""
	if set {
		spec = `spec: {topology: {controlPlane: {metadata: {annotations: {controlplane.cluster.x-k8s.io/skip-kube-proxy: "", controlplane.cluster.x-k8s.io/skip-coredns: ""}}}}}\n`
	}
	return fmt.Sprintf(`printf 'apiVersion: cluster.x-k8s.io/%s\nkind: Cluster\nmetadata: {name: %s, namespace: %s}\n%s' | %s apply --server-side --field-manager=%s -f -`,
		r.capiAPI, r.capiName, r.capiNS, spec, r.kubectlMgmt(), capiAddonsHoldManager)
}

// capiAllTopologies reads the Cluster's MachineDeployment topology names.
func (r *renderer) capiAllTopologies() string {
	return "$(" + r.capiGet("{.spec.topology.workers.machineDeployments[*].name}") + ")"
}

// capiDeferAll defers every MachineDeployment topology of the Cluster
// (ClusterTopologyDeferUpgradeAnnotation, api/core/v1beta2/common_types.go
// at kubernetes-sigs/cluster-api v1.14.0: "the Kubernetes upgrade for this
// MachineDeployment topology is deferred"), read from the Cluster when the
// step runs, and fails unless every one carries it.
//
// catchUp is the hold before the pools' catch-up steps (capiCatchUpHold):
// the Cluster is at to already.
//
// Before the catch-up steps some topologies are behind the Cluster's
// version and not deferred, so the topology controller would roll one as
// soon as any write to the Cluster wakes it, between one topology's defer
// and the next: the Cluster is paused while the defers go in (a paused
// Cluster is not reconciled: "Return early if the Cluster is paused",
// Reconciler.Reconcile, core/reconcilers/topology/cluster/cluster_controller.go
// at v1.14.0), under a field manager of its own, and let go of only once
// every topology is deferred (a Cluster paused by anyone else stays so).
func (r *renderer) capiDeferAll(to string, catchUp bool) []string {
	when := "before it moves to " + to
	if catchUp {
		when = "before the pools behind its version " + to + " move (the topology controller rolls a topology behind it on its own unless it is deferred)"
	}
	out := []string{
		fmt.Sprintf("# defer the upgrade of every MachineDeployment topology of Cluster %s/%s %s (on the management cluster), each under a field manager of its own:", r.capiNS, r.capiName, when),
	}
	if catchUp {
		out = append(out, "# the Cluster paused first, so that the topology controller rolls nothing between one topology's defer and the next:", r.capiPause(true))
	}
	out = append(out, fmt.Sprintf("for MD in %s; do %s; done", r.capiAllTopologies(), r.capiApplyDefer(true)))
	if catchUp {
		return append(out, chain(r.capiDeferCheck(), r.capiPause(false))...)
	}
	return append(out, r.capiDeferCheck())
}

// capiPauseManager is the field manager of the hold's pause.
const capiPauseManager = "gpufleet-defer-pause"

// capiPause pauses the Cluster (spec.paused, Cluster API v1.14.0
// api/core/v1beta2 and v1beta1 cluster_types.go) under a field manager of
// its own, or, with set false, lets go of it.
func (r *renderer) capiPause(set bool) string {
	spec := ""
	if set {
		spec = `spec: {paused: true}\n`
	}
	return fmt.Sprintf(`printf 'apiVersion: cluster.x-k8s.io/%s\nkind: Cluster\nmetadata: {name: %s, namespace: %s}\n%s' | %s apply --server-side --field-manager=%s -f -`,
		r.capiAPI, r.capiName, r.capiNS, spec, r.kubectlMgmt(), capiPauseManager)
}

// holdBeforePools reports whether a hold step comes before node-pool steps
// (capiCatchUpHold) rather than before a control-plane step.
func (r *renderer) holdBeforePools(s Step) bool {
	for _, n := range r.plan.Steps {
		if n.Number > s.Number {
			return n.Phase == PhaseNodePool
		}
	}
	return false
}

// capiDeferCheck fails, naming them, when a MachineDeployment topology
// lacks the defer-upgrade annotation.
func (r *renderer) capiDeferCheck() string {
	return fmt.Sprintf(`! %s | grep -v '=%s$'   # prints and fails on a topology not deferred`,
		r.capiGet(`{range .spec.topology.workers.machineDeployments[*]}{.name}={.metadata.annotations.topology\.cluster\.x-k8s\.io/defer-upgrade}{"\n"}{end}`), deferValue)
}

// capiRelease undoes the defer of the MachineDeployment topologies whose
// Machines run the pool's nodes, found from the Machines on the management
// cluster (their topology.cluster.x-k8s.io/deployment-name label, set from
// the MachineDeployment's template: exp/topology/desiredstate/desired_state.go
// at v1.14.0) and the Nodes here (Machine status.nodeRef).
func (r *renderer) capiRelease(pool, sel string) []string {
	file := fmt.Sprintf("pool-%s-nodes.txt", fileSafe(pool))
	return []string{
		"# the MachineDeployment topologies whose Machines run this pool's nodes (Nodes do not carry it: Cluster API syncs only node-role.kubernetes.io/, node-restriction.kubernetes.io/ and node.cluster.x-k8s.io labels to them):",
		r.poolNodesFile(sel, file),
		r.capiTopologiesOf(file),
		"# undo their defer-upgrade: the topology controller rolls them to the Cluster's version (on the management cluster):",
		r.capiReleaseLoop(),
	}
}

// poolNodesFile writes the names of the nodes sel selects to file.
func (r *renderer) poolNodesFile(sel, file string) string {
	return fmt.Sprintf(`kubectl get nodes -l %s -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' > %s`, sel, file)
}

// capiTopologiesOf sets TOPOLOGIES to the MachineDeployment topologies
// whose Machines run the nodes listed in file, and fails on none.
func (r *renderer) capiTopologiesOf(file string) string {
	return fmt.Sprintf(`TOPOLOGIES=$(%s -n %s get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s -o jsonpath='{range .items[*]}{.status.nodeRef.name} {.metadata.labels.topology\.cluster\.x-k8s\.io/deployment-name}{"\n"}{end}' | awk 'NR == FNR {n[$1]; next} ($1 in n) && NF == 2 {print $2}' %s - | sort -u) && echo "$TOPOLOGIES" | grep .`,
		r.kubectlMgmt(), sq(r.capiNS), sq(r.capiName), file)
}

// capiReleaseLoop undoes the defer-upgrade of each topology in TOPOLOGIES.
func (r *renderer) capiReleaseLoop() string {
	return fmt.Sprintf("for MD in $TOPOLOGIES; do %s; done", r.capiApplyDefer(false))
}

// capiReleaseAll undoes every defer after the hop's last pool step, so
// that no topology is left behind the next hop.
func (r *renderer) capiReleaseAll() []string {
	return []string{
		"# every pool is on the Cluster's version: undo any defer-upgrade left (a topology that runs no node here), so that the next hop's check finds none deferred:",
		fmt.Sprintf("for MD in %s; do %s; done", r.capiAllTopologies(), r.capiApplyDefer(false)),
	}
}

// fileSafe makes a name usable in a file name.
func fileSafe(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
			return c
		}
		return '_'
	}, s)
}

// karpenterPin pins the pool's EC2NodeClass to the AMIs its nodes run now,
// when it selects AMIs by alias; the terms are kept in a file for the
// pool's step. An id term needs amiFamily, which an alias implies (the
// alias's family: al2023 -> AL2023, al2 -> AL2, bottlerocket ->
// Bottlerocket; https://karpenter.sh/docs/concepts/nodeclasses/#specamifamily).
func (r *renderer) karpenterPin(pool string) []string {
	p := sq(pool)
	return []string{
		"# pin NodePool " + pool + "'s EC2NodeClass to the AMIs its nodes run now (an alias drifts with the control plane); shared NodeClasses pin every pool on them:",
		fmt.Sprintf("NODECLASS=$(kubectl get nodepool %s -o jsonpath='{.spec.template.spec.nodeClassRef.name}')", p),
		fmt.Sprintf(`kubectl get ec2nodeclass "$NODECLASS" -o jsonpath='{.spec.amiSelectorTerms}' > "ec2nodeclass-$NODECLASS-terms.json"   # put back at pool %s's step`, pool),
		fmt.Sprintf(`AMIS=$(kubectl get nodeclaims -l karpenter.sh/nodepool=%s -o jsonpath='{range .items[*]}{.status.imageID}{"\n"}{end}' | sort -u | sed 's/.*/{"id":"&"}/' | paste -sd, -) && echo "[$AMIS]" > "ec2nodeclass-$NODECLASS-pinned.json"   # the AMIs before the upgrade: the pool's way back`, p),
		`FAMILY=$(kubectl get ec2nodeclass "$NODECLASS" -o jsonpath='{.spec.amiSelectorTerms[0].alias}' | cut -d@ -f1 | sed 's/^al2023$/AL2023/;s/^al2$/AL2/;s/^bottlerocket$/Bottlerocket/')`,
		`[ -n "$FAMILY" ] && kubectl patch ec2nodeclass "$NODECLASS" --type merge -p "{\"spec\":{\"amiFamily\":\"$FAMILY\",\"amiSelectorTerms\":[$AMIS]}}"   # no alias: nothing drifts, nothing to pin`,
	}
}

// karpenterUnpin puts the pool's EC2NodeClass terms back.
func (r *renderer) karpenterUnpin(pool string) []string {
	return []string{
		"# put NodePool " + pool + "'s AMI selection back (the alias resolves the AMIs for the new control plane):",
		fmt.Sprintf("NODECLASS=$(kubectl get nodepool %s -o jsonpath='{.spec.template.spec.nodeClassRef.name}')", sq(pool)),
		`grep -q alias "ec2nodeclass-$NODECLASS-terms.json" && kubectl patch ec2nodeclass "$NODECLASS" --type merge -p "{\"spec\":{\"amiFamily\":null,\"amiSelectorTerms\":$(cat "ec2nodeclass-$NODECLASS-terms.json")}}"`,
	}
}

// budgetHold adds a disruption budget of 0 for drift to the pool's
// NodePool, keeping its budgets in a file for the pool's step
// (https://karpenter.sh/docs/concepts/disruption/#nodepool-disruption-budgets;
// EKS Auto Mode's built-in NodePools cannot be changed:
// https://docs.aws.amazon.com/eks/latest/userguide/create-node-pool.html,
// read 2026-09-20).
func (r *renderer) budgetHold(pool string) []string {
	p := sq(pool)
	return []string{
		"# hold NodePool " + pool + "'s drift with a disruption budget of 0 (the built-in system and general-purpose NodePools cannot be changed; expiry is not held):",
		fmt.Sprintf(`kubectl get nodepool %s -o jsonpath='{.spec.disruption.budgets}' > nodepool-%s-budgets.json   # put back at the pool's step`, p, pool),
		fmt.Sprintf(`kubectl patch nodepool %s --type json -p '[{"op":"add","path":"/spec/disruption/budgets/-","value":{"nodes":"0","reasons":["Drifted"]}}]'`, p),
	}
}

// budgetRestore puts the pool's NodePool budgets back.
func budgetRestore(pool string) []string {
	return []string{
		"# put NodePool " + pool + "'s disruption budgets back:",
		fmt.Sprintf(`kubectl patch nodepool %s --type merge -p "{\"spec\":{\"disruption\":{\"budgets\":$(cat nodepool-%s-budgets.json)}}}"`, sq(pool), pool),
	}
}

// gkeExclusion adds or removes the cluster's maintenance exclusion of
// scope no_minor_or_node_upgrades. Google Cloud SDK 528 takes no
// until-end-of-support flag (the API's EndTimeBehavior UNTIL_END_OF_SUPPORT
// has none there): --add-maintenance-exclusion-end "must be specified if
// any of the other arguments in this group are specified" (gcloud container
// clusters update --help, SDK 528). The exclusion ends 30 days on, inside
// the end of support of any minor with a month of support left (GKE
// refuses an end past it, and the command fails before anything changes);
// a plan that runs longer moves the end with the same flag.
func (r *renderer) gkeExclusion(add bool) []string {
	name := r.gkeExclusionName()
	loc := fmt.Sprintf("--location=%s%s", sq(phLocation), r.project())
	if add {
		r.gkeHeld = true
		return []string{
			"# hold GKE's node auto-upgrades (on by default) for every node pool, for 30 days (GNU date; BSD date: -v+30d); manual upgrades still run:",
			fmt.Sprintf("gcloud container clusters update %s %s --add-maintenance-exclusion-name=%s --add-maintenance-exclusion-start=$(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ) --add-maintenance-exclusion-end=$(date -u -d '+30 days' +%%Y-%%m-%%dT%%H:%%M:%%SZ) --add-maintenance-exclusion-scope=no_minor_or_node_upgrades --quiet", sq(r.cluster), loc, name),
		}
	}
	r.gkeHeld = false
	return []string{
		"# every held pool has moved: lift the maintenance exclusion",
		fmt.Sprintf("gcloud container clusters update %s %s --remove-maintenance-exclusion=%s --quiet", sq(r.cluster), loc, name),
	}
}

// gkeExclusionName names the maintenance exclusion of a plan.
func (r *renderer) gkeExclusionName() string {
	return "gpufleet-upgrade-" + strings.ReplaceAll(r.target, ".", "-")
}
