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

// rolls says how the provider rolls a pool on its own.
func (r *renderer) rolls(pool string) rollout {
	pl, ok := r.pools[pool]
	if !ok || pool == NoPool {
		return rollNone
	}
	switch r.prov {
	case ProviderCAPI:
		if pl.Label == "cluster.x-k8s.io/deployment-name" {
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
		if pl.Label == labelGKENodepool {
			return rollGKE
		}
	}
	return rollNone
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
// that has a step of its own later; the pool's step releases it.
func (r *renderer) insertHolds(p *Plan) {
	later := map[string][]int{} // pool -> its node-pool step numbers
	for _, s := range p.Steps {
		if s.Phase == PhaseNodePool {
			later[s.Pool] = append(later[s.Pool], s.Number)
		}
	}
	held := map[string]bool{}
	var steps []Step
	for _, s := range p.Steps {
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
				steps = append(steps, Step{ControlPlane: s.ControlPlane, Phase: PhaseHold, To: s.To, Status: StatusOK, Holds: hold,
					Action: fmt.Sprintf("keep %s from rolling %s when the control plane moves to %s", r.prov.Title(), poolList(hold), s.To),
					Note:   "each pool then moves at its own step, gang-aware, which undoes the hold"})
			}
		}
		steps = append(steps, s)
	}
	renumber(p, steps)
}

func poolList(pools []string) string {
	if len(pools) == 1 {
		return "pool " + pools[0]
	}
	return "pools " + strings.Join(pools, ", ")
}

// holdCommands holds the step's pools.
func (r *renderer) holdCommands(s Step) []string {
	var out []string
	for _, pool := range s.Holds {
		switch r.rolls(pool) {
		case rollCAPI:
			out = append(out, r.capiDefer(pool, true)...)
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
// whole cluster and is lifted after the last held pool's step.
func (r *renderer) release(pool string) []string {
	if !r.held[pool] {
		return nil
	}
	r.held[pool] = false
	switch r.rolls(pool) {
	case rollCAPI:
		return r.capiDefer(pool, false)
	case rollKarpenter:
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

// capiDefer sets or removes the defer-upgrade annotation on the pool's
// MachineDeployment topology with server-side apply: the topology's
// machineDeployments are a list map keyed by name (+listType=map,
// +listMapKey=name in api/core/v1beta1 and v1beta2 cluster_types.go), so a
// partial Cluster changes that one entry, and applying it again without the
// annotation under the same field manager removes what that manager set.
// The pool is named by its MachineDeployment; the topology entry by the
// MachineDeployment's label topology.cluster.x-k8s.io/deployment-name.
func (r *renderer) capiDefer(pool string, set bool) []string {
	ann := "{}"
	what := "# undo the defer-upgrade of " + pool + ": the topology controller rolls its MachineDeployment to the Cluster's version (on the management cluster):"
	if set {
		ann = `{annotations: {` + CAPIDeferUpgradeAnnotation + `: ""}}`
		what = "# defer the upgrade of MachineDeployment " + pool + " (on the management cluster):"
	}
	return []string{
		what,
		fmt.Sprintf("TOPOLOGY=$(%s -n %s get machinedeployment %s -o jsonpath='{.metadata.labels.topology\\.cluster\\.x-k8s\\.io/deployment-name}')", r.kubectlMgmt(), sq(r.capiNS), sq(pool)),
		fmt.Sprintf(`printf 'apiVersion: cluster.x-k8s.io/%s\nkind: Cluster\nmetadata: {name: %s, namespace: %s}\nspec: {topology: {workers: {machineDeployments: [{name: %%s, metadata: %s}]}}}\n' "$TOPOLOGY" | %s apply --server-side --field-manager=gpufleet-upgrade -f -`,
			r.capiAPI, r.capiName, r.capiNS, ann, r.kubectlMgmt()),
	}
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
		fmt.Sprintf(`AMIS=$(kubectl get nodeclaims -l karpenter.sh/nodepool=%s -o jsonpath='{range .items[*]}{.status.imageID}{"\n"}{end}' | sort -u | sed 's/.*/{"id":"&"}/' | paste -sd, -)`, p),
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

// gkeExclusion adds or removes the cluster's maintenance exclusion; it
// lasts until the control plane version's end of support
// (MaintenanceExclusionOptions.EndTimeBehavior UNTIL_END_OF_SUPPORT in the
// Kubernetes Engine v1 API; --add-maintenance-exclusion-until-end-of-support
// in gcloud; the end is output only, computed from the control plane
// version).
func (r *renderer) gkeExclusion(add bool) []string {
	name := "gpufleet-upgrade-" + strings.ReplaceAll(r.target, ".", "-")
	loc := fmt.Sprintf("--location=%s%s", sq(phLocation), r.project())
	if add {
		r.gkeHeld = true
		return []string{
			"# hold GKE's node auto-upgrades (on by default) for every node pool; manual upgrades still run:",
			fmt.Sprintf("gcloud container clusters update %s %s --add-maintenance-exclusion-name=%s --add-maintenance-exclusion-start=$(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ) --add-maintenance-exclusion-until-end-of-support --add-maintenance-exclusion-scope=no_minor_or_node_upgrades", sq(r.cluster), loc, name),
		}
	}
	r.gkeHeld = false
	return []string{
		"# every held pool has moved: lift the maintenance exclusion",
		fmt.Sprintf("gcloud container clusters update %s %s --remove-maintenance-exclusion=%s", sq(r.cluster), loc, name),
	}
}
