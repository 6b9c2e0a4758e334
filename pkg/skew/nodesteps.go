package skew

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/nodepool"
)

// A node-pool step never runs kubectl drain -l <pool>: drain cordons every
// selected node before it evicts any, so the whole pool would leave service
// at once. Nodes go one at a time (control-plane nodes strictly so), GPU
// pools one fabric unit at a time with gang-drain, so that the rest of the
// pool keeps placing whole gangs. Each step ends with gates that fail when
// the pool is not on its planned version: skew verify --pool, and
// gpu-validate nodes --kubelet-version on GPU pools.

// selector returns the label selector of a pool's nodes.
func (r *renderer) selector(pool string) string {
	if sel := r.pools[pool].Selector(); sel != "" {
		return sel
	}
	return phSelector
}

// ControlPlane reports whether the pool is the control-plane nodes (named
// by their role label).
func (p Pool) ControlPlane() bool { return slices.Contains(controlPlaneRoles, p.Label) }

// Selector is the label selector of the pool's nodes: the pool label with
// the pool's name, or, for the control-plane nodes, the role label alone
// (an exists-selector: node-role.kubernetes.io/control-plane carries an
// empty value, and node-role.kubernetes.io/master on older clusters). It
// is "" for nodes without a pool label, which no selector picks alone.
func (p Pool) Selector() string {
	if p.Label == "" || p.Name == NoPool {
		return ""
	}
	for _, l := range controlPlaneRoles {
		if p.Label == l {
			return l
		}
	}
	return p.Label + "=" + p.Name
}

// poolLabelFlag is the --pool-label the skew commands of the runbook
// need to find its pools, " --pool-label LABEL" when a pool is named by a
// label skew does not read by default (the plan's own --pool-label), ""
// otherwise.
func (r *renderer) poolLabelFlag() string {
	var names []string
	for n := range r.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pl := r.pools[n]
		if n == NoPool || pl.Label == "" || slices.Contains(controlPlaneRoles, pl.Label) || slices.Contains(nodepool.Labels, pl.Label) {
			continue
		}
		return " --pool-label " + sq(pl.Label)
	}
	return ""
}

// gpuPool reports whether a pool has GPU nodes, where training gangs run.
// Not knowing counts as yes, since gang-drain drains a pool without gangs
// just as well (it evicts what is not a gang). Which pods are gangs is
// gang-drain's own question (pkg/gang), asked when it runs; the plan
// reads no pods outside kube-system, so that the offline plan from a
// saved report gives the same commands.
func (r *renderer) gpuPool(pool string) bool {
	pl, ok := r.pools[pool]
	if !ok || pl.GPUNodes == nil {
		return true
	}
	return *pl.GPUNodes > 0
}

// controlPlanePool reports whether the pool is the control-plane nodes.
func (r *renderer) controlPlanePool(pool string) bool {
	for _, l := range controlPlaneRoles {
		if r.pools[pool].Label == l {
			return true
		}
	}
	return false
}

// drainLimit is how long the drain of a pool may take before whoever
// drains it gives up, with why; "" when there is no limit.
func (r *renderer) drainLimit(pool string) (string, string) {
	switch r.replacer(pool) {
	case replaceEKSNodegroup:
		// "If the pods don't leave the node within 15 minutes and there's
		// no force flag, the upgrade phase fails with a PodEvictionFailure
		// error" (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html,
		// read 2026-09-20).
		return "15m", "EKS managed node groups give up after 15 minutes"
	case replaceGKE:
		// GKE respects PodDisruptionBudgets for up to 60 minutes during a
		// node upgrade, then evicts anyway
		// (https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies,
		// as pdb-blockers' help states it).
		return "1h", "GKE honours PodDisruptionBudgets for up to 1 hour, then evicts"
	case replaceAKS:
		// drainTimeoutInMinutes defaults to 30
		// (https://learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling,
		// as pdb-blockers' help states it).
		return "30m", "AKS waits drainTimeoutInMinutes, 30 by default"
	case replaceCAPI:
		// nodeDrainTimeout is unset by default: no limit
		// (MachineDeployment spec.template.spec.nodeDrainTimeout).
		return "", "Cluster API drains without a time limit unless the MachineDeployment sets nodeDrainTimeout"
	case replaceKarpenter, replaceAutoMode:
		if !r.gpuPool(pool) {
			// Karpenter waits for ever unless the NodePool sets
			// terminationGracePeriod (https://karpenter.sh/docs/concepts/disruption/#terminationgraceperiod).
			return "", "Karpenter drains without a time limit unless the NodePool sets terminationGracePeriod"
		}
	}
	return selfDrainTimeout, "this runbook's own drain time limit"
}

// pdbBlockers is the pre-check of a drain of sel.
func (r *renderer) pdbBlockers(pool, sel string) string {
	d, why := r.drainLimit(pool)
	if d == "" {
		return fmt.Sprintf("kubectl pdb-blockers -l %s   # %s", sel, why)
	}
	return fmt.Sprintf("kubectl pdb-blockers -l %s --drain-timeout %s   # %s", sel, d, why)
}

// Who replaces a pool's nodes.
type replacer int

const (
	replaceInPlace replacer = iota
	replaceEKSNodegroup
	replaceKarpenter
	replaceAutoMode
	replaceGKE
	replaceAKS
	replaceCAPI
)

func (r *renderer) replacer(pool string) replacer {
	pl := r.pools[pool]
	switch r.prov {
	case ProviderEKS:
		switch {
		case pl.Label == labelKarpenterPool && pl.AutoModeNodes > 0:
			return replaceAutoMode
		case pl.Label == labelKarpenterPool:
			return replaceKarpenter
		}
		return replaceEKSNodegroup
	case ProviderGKE:
		return replaceGKE
	case ProviderAKS:
		return replaceAKS
	case ProviderCAPI:
		return replaceCAPI
	}
	return replaceInPlace
}

func (r *renderer) nodePool(s Step) blocks {
	sel := r.selector(s.Pool)
	var b blocks
	if r.saved == "" {
		// No hop before this step: record the evidence to verify against.
		r.saved = baseline(r.target)
		b.add(fmt.Sprintf("kubectl skew preflight --target v%s --save %s%s", r.target, r.saved, r.poolLabelFlag()))
	}
	gpu := r.gpuPool(s.Pool)
	validated := false // the step validated the whole pool before its gangs came back
	switch rep := r.replacer(s.Pool); {
	case r.controlPlanePool(s.Pool) && (r.prov == ProviderKubeadm || r.prov == ProviderK3s || r.prov == ProviderRKE2 || r.prov == ProviderCAPI):
		b.add("# the control-plane nodes' kubelets moved with their own control-plane step, one node at a time; check:",
			fmt.Sprintf("kubectl get nodes -l %s -o wide", sel))
	case r.inferencePool(s.Pool):
		b.join(r.inferenceStep(s, sel))
		validated = true
	case rep == replaceInPlace && r.asgOf(s.Pool) != "":
		b.join(r.asgRefresh(s, sel, gpu))
		validated = gpu
	case rep == replaceInPlace && gpu:
		b.join(r.inPlaceUnits(s, sel))
	case rep == replaceInPlace:
		b.join(r.inPlaceNodes(s, sel))
	case rep == replaceAutoMode && autoModeBuiltin(s.Pool):
		b.add(r.pdbBlockers(s.Pool, sel),
			"# "+s.Pool+" is a built-in EKS Auto Mode NodePool, which cannot be changed or held: Auto Mode replaces its nodes after the control plane; follow it:",
			fmt.Sprintf("kubectl get nodeclaims -l karpenter.sh/nodepool=%s -o wide   # until every node is new", sq(s.Pool)))
	case rep == replaceKarpenter || rep == replaceAutoMode:
		b.add(r.karpenterStep(s, sel, gpu)...)
	default:
		b.join(r.providerRollout(s, sel, gpu))
		validated = gpu
	}
	if replaced := r.asgOf(s.Pool) != "" || (r.replacer(s.Pool) != replaceInPlace && !r.controlPlanePool(s.Pool)); replaced {
		who := r.prov.Title()
		if r.asgOf(s.Pool) != "" {
			who = "the instance refresh"
		}
		first := ""
		if _, mark := r.capiStatefulFirst(s); mark != "" {
			first = "their Machines were marked " + capiDeleteFirst + " above, which the rollout deletes before any other Machine, so they go first; the MachineDeployment's maxSurge and maxUnavailable still set how many go at once"
		}
		if c := r.statefulEachBatch(s, sel, who, first); c != nil {
			b.cut()
			b.add(c...)
		}
	}
	b.cut()
	// The pool's gates, chained, and what may only follow them: a hold
	// is lifted only once the pool passed.
	var gates []string
	if gpu && !r.controlPlanePool(s.Pool) && !validated {
		gates = append(gates, validateCmd(sel, s))
	}
	gates = append(gates, fmt.Sprintf("kubectl skew verify --baseline %s --pool %s%s", r.saved, sq(s.Pool+"=v"+s.To), r.poolLabelFlag()))
	if r.rolls(s.Pool) == rollGKE {
		r.held[s.Pool] = false
	}
	var then []string
	if r.prov == ProviderCAPI && r.capiHeld && r.lastPoolStepOfHop(s) {
		r.capiHeld = false
		then = append(then, r.capiReleaseAll()...)
	}
	then = append(then, r.releaseLast()...)
	b.add(gated(gates, then)...)
	return b
}

// gated chains gates and then the commands of then, whose comments go
// first, so that a failed gate stops what follows it.
func gated(gates, then []string) []string {
	var notes, cmds []string
	for _, c := range then {
		if strings.HasPrefix(c, "#") {
			notes = append(notes, c)
		} else {
			cmds = append(cmds, c)
		}
	}
	return append(notes, chain(append(gates, cmds...)...)...)
}

// lastPoolStepOfHop reports whether no node-pool step follows s before the
// next hold or control-plane step.
func (r *renderer) lastPoolStepOfHop(s Step) bool {
	for _, n := range r.plan.Steps {
		if n.Number <= s.Number {
			continue
		}
		switch n.Phase {
		case PhaseNodePool:
			return false
		case PhaseHold, PhaseControlPlane:
			return true
		}
	}
	return true
}

// onNode is the upgrade of one node in place, run on the node: a block of
// its own (or one alternative per OS family), pasted on each node. on is
// the line that says which nodes, and nodes their kubectl resource (node
// "$NODE", nodes -l SELECTOR) for a step run here between two on the
// nodes.
func (r *renderer) onNode(s Step, on, nodes string) blocks {
	var b blocks
	switch r.prov {
	case ProviderKubeadm:
		kubeadmNode(&b, packageManager(r.pools[s.Pool].OSImages), s.From, s.To, s.ControlPlane, r.firstCP(), on, nodes)
	case ProviderK3s:
		b.add(k3sInstall("agent", s.To)...)
	case ProviderRKE2:
		b.add(rke2Install("agent", s.To)...)
	default:
		b.add(fmt.Sprintf("# upgrade the kubelet to v%s.%s with the installer that made the cluster", s.To, phPatch))
	}
	return b
}

// inPlaceNodes drains and upgrades the pool's nodes one at a time.
func (r *renderer) inPlaceNodes(s Step, sel string) blocks {
	who := "one node at a time"
	if r.controlPlanePool(s.Pool) {
		who = "the control-plane nodes strictly one at a time"
	}
	each := fmt.Sprintf("for each node of kubectl get nodes -l %s -o name", sel)
	order, checks := r.statefulFirst(s.Pool)
	if order != "" {
		each = order + " of kubectl get nodes -l " + sel + " -o name"
	}
	var b blocks
	b.add(r.pdbBlockers(s.Pool, sel),
		fmt.Sprintf("# %s (kubectl drain -l would cordon the whole pool first); %s:", who, each),
		"NODE="+sq(phNode),
		fmt.Sprintf(`kubectl drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout=%s`, selfDrainTimeout))
	b.cut()
	b.add("# on $NODE:")
	b.join(r.onNode(s, "# on $NODE:", `node "$NODE"`))
	b.cut()
	b.add("# here:", `kubectl uncordon "$NODE"`)
	b.cut()
	b.join(checks)
	return b
}

// unitBlock says how a GPU pool is split: one fabric unit at a time when a
// topology label splits it, else a stated batch of nodes that keeps most
// of the pool placing gangs (a quarter of the pool, at most 8 nodes, as the
// design document's maxUnavailable: 8 for a rail group or rack set).
// It returns the lines that choose one unit ($UNIT) or batch ($NODES), the
// unit's quoted label selector ("" for a batch) and its gang-drain run id.
func (r *renderer) unitBlock(s Step, sel string) (intro []string, unitSel, runID string) {
	pl := r.pools[s.Pool]
	run := fmt.Sprintf("%s-to-%s", s.Pool, s.To)
	if u := pl.Units; u != nil {
		vals := strings.Join(u.Values, " ")
		if u.More > 0 {
			vals += fmt.Sprintf(" (and %d more)", u.More)
		}
		intro = []string{
			fmt.Sprintf("# one fabric unit at a time, by %s (%s), so the rest of the pool keeps placing whole gangs; for each unit in turn:", u.Label, vals),
			"UNIT=" + sq("<"+lastPart(u.Label)+">"),
		}
		return intro, fmt.Sprintf(`"%s,%s=$UNIT"`, sel, u.Label), fmt.Sprintf(`"%s-$UNIT"`, run)
	}
	n := pl.Nodes / 4
	if n < 1 {
		n = 1
	}
	if n > 8 {
		n = 8
	}
	intro = []string{
		fmt.Sprintf("# no rack or rail label (%s) on the nodes: %s at a time, so the rest of the pool keeps placing whole gangs; for each batch of kubectl get nodes -l %s -o name:", strings.Join(FabricLabels[:2], ", "), Nodes(n), sel),
		"NODES=" + sq(strings.TrimSpace(strings.Repeat(phNode+" ", n))) + fmt.Sprintf("   # the next %s", Nodes(n)),
	}
	return intro, "", ""
}

func lastPart(label string) string {
	if i := strings.LastIndexAny(label, "/."); i >= 0 {
		return label[i+1:]
	}
	return label
}

// gangDrain is gang-drain run over one unit or batch.
func (r *renderer) gangDrain(unitSel, run string) string {
	if unitSel == "" && run == "" {
		// A re-run over the same nodes resumes the run recorded on them.
		return fmt.Sprintf("kubectl gang-drain run $NODES --timeout %s", selfDrainTimeout)
	}
	if unitSel == "" {
		return fmt.Sprintf("kubectl gang-drain run $NODES --run-id %s --timeout %s", run, selfDrainTimeout)
	}
	return fmt.Sprintf("kubectl gang-drain run -l %s --run-id %s --timeout %s", unitSel, run, selfDrainTimeout)
}

// unitPDB is pdb-blockers over one unit or batch, which gang-drain drains
// with the runbook's own time limit.
func (r *renderer) unitPDB(unitSel string) string {
	what := "$NODES"
	if unitSel != "" {
		what = "-l " + unitSel
	}
	return fmt.Sprintf("kubectl pdb-blockers %s --drain-timeout %s   # gang-drain run --timeout %s below", what, selfDrainTimeout, selfDrainTimeout)
}

// inPlaceUnits drains a GPU pool one unit at a time with gang-drain,
// upgrades the unit's nodes in place, validates them and brings the gangs
// back before the next unit.
func (r *renderer) inPlaceUnits(s Step, sel string) blocks {
	intro, unitSel, run := r.unitBlock(s, sel)
	var b blocks
	b.add(intro...)
	b.add(r.unitPDB(unitSel), r.gangDrain(unitSel, run))
	b.cut()
	each, nodes := "# on each node of the unit (kubectl get nodes -l "+unitSel+" -o name):", "nodes -l "+unitSel
	if unitSel == "" {
		each, nodes = "# on each node of $NODES:", "node $NODES"
	}
	b.add(each)
	b.join(r.onNode(s, each, nodes))
	b.cut()
	// The unit's gangs come back only to nodes that pass validation.
	if unitSel == "" {
		b.add("# here, then the next batch:")
		b.add(chain(fmt.Sprintf("kubectl gpu-validate nodes $NODES --kubelet-version v%s %s", s.To, validateChecks), "kubectl gang-drain restore $NODES")...)
	} else {
		b.add("# here, then the next unit:")
		b.add(chain(validateCmd(unitSel, s), "kubectl gang-drain restore "+run)...)
	}
	if c := r.statefulAfter(s.Pool, "a unit moves whole, so the stateful nodes go with their units", "after each unit, before the next"); c != nil {
		b.cut()
		b.add(c...)
	}
	return b
}

// poolRun is the gang-drain run id of a pool step whose nodes the provider
// replaces: one run for every unit or batch, so that one restore brings
// back every gang the step stopped.
func poolRun(s Step) string { return fmt.Sprintf(`"%s-to-%s"`, s.Pool, s.To) }

// stopGangs stops a GPU pool's gangs unit by unit, under run, ahead of a
// provider that replaces the nodes itself: a block pasted once per unit
// or batch, apart from what follows once every unit is drained.
func (r *renderer) stopGangs(s Step, sel, run, why string) []string {
	intro, unitSel, _ := r.unitBlock(s, sel)
	out := []string{"# " + why}
	out = append(out, intro...)
	return append(out, r.unitPDB(unitSel), r.gangDrain(unitSel, run))
}

// reactivate brings back the gangs a run stopped. The provider deleted the
// nodes that recorded the run; gang-drain restore finds the run's gangs by
// the record each stopped gang carries.
func reactivate(run string, validate ...string) []string {
	return append([]string{"# bring back the gangs the run stopped (the replaced nodes took the run's node records with them; restore finds the gangs by the record on each), once the new nodes pass validation:"},
		chain(append(validate, "kubectl gang-drain restore "+run+" --dry-run", "kubectl gang-drain restore "+run)...)...)
}

// validateChecks are the gpu-validate checks an upgraded GPU node passes
// before its gangs come back, beyond the GPU count and kubelet version:
// --xid fails a node on fatal Xid events in its kernel log since it last
// became Ready, --dcgm on DCGM's level-1 diagnostics, which need the GPUs
// free, as they are before the gangs return (the flags of
// plugins/gpuvalidate, held by TestRunbookValidateFlags).
const validateChecks = "--xid --dcgm"

// validateCmd is gpu-validate over a selector at the step's version.
func validateCmd(sel string, s Step) string {
	return fmt.Sprintf("kubectl gpu-validate nodes -l %s --kubelet-version v%s %s", sel, s.To, validateChecks)
}

// providerRollout moves a pool the provider replaces as a whole: EKS
// managed node groups, GKE and AKS node pools, Cluster API
// MachineDeployments. The provider picks the nodes and drains them with
// its own limit; a GPU pool's gangs are stopped unit by unit first.
func (r *renderer) providerRollout(s Step, sel string, gpu bool) blocks {
	rep := r.replacer(s.Pool)
	if gpu && rep == replaceCAPI && r.capiHeld {
		return r.capiUnits(s, sel)
	}
	var b blocks
	var out []string
	if gpu {
		b.add(r.stopGangs(s, sel, poolRun(s), fmt.Sprintf("%s replaces this pool's nodes in an order it picks, so it cannot follow fabric units: stop the pool's gangs at a checkpoint first, one unit at a time; all %s of the pool are out of training until the rollout ends and the new nodes pass gpu-validate (to keep capacity instead, create a pool at v%s and move the units across: see Before you start)", r.prov.Title(), Nodes(r.pools[s.Pool].Nodes), s.To))...)
		b.cut()
		out = append(out, "# every unit drained; what still blocks the provider's own drain:")
	}
	out = append(out, r.pdbBlockers(s.Pool, sel))
	switch rep {
	case replaceEKSNodegroup:
		out = append(out, r.eksNodegroup(s)...)
	case replaceGKE:
		// Surge or blue-green is the pool's own upgrade strategy; a
		// blue-green pool soaks and then finishes with complete-upgrade
		// (https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies).
		loc := sq(phLocation) + r.project()
		np := sq(r.providerPool(s.Pool, "<node-pool-name>", labelGKENodepool))
		out = append(out,
			fmt.Sprintf("gcloud container node-pools describe %s --cluster=%s --location=%s --format='yaml(upgradeSettings)'   # GKE's batch: surge (maxSurge, maxUnavailable) or blue-green", np, sq(r.cluster), loc),
			fmt.Sprintf("gcloud container clusters upgrade %s --node-pool=%s --cluster-version=%s --location=%s --quiet", sq(r.cluster), np, s.To, loc),
			fmt.Sprintf("# BLUE_GREEN pools only, after the soak: gcloud container node-pools complete-upgrade %s --cluster=%s --location=%s --quiet", np, sq(r.cluster), loc))
	case replaceAKS:
		// https://learn.microsoft.com/azure/aks/upgrade-aks-cluster#upgrade-a-node-pool
		np := sq(r.providerPool(s.Pool, "<nodepool-name>", labelAKSAgentpool, "agentpool"))
		out = append(out,
			fmt.Sprintf("az aks nodepool show --resource-group %s --cluster-name %s --name %s --query upgradeSettings   # AKS's batch: maxSurge", sq(r.resourceGroup()), sq(r.cluster), np),
			fmt.Sprintf("az aks nodepool upgrade --resource-group %s --cluster-name %s --name %s --kubernetes-version %s --yes", sq(r.resourceGroup()), sq(r.cluster), np, sq(s.To+"."+phPatch)))
	case replaceCAPI:
		if r.capiHeld {
			notes, mark := r.capiStatefulFirst(s)
			rel := r.capiRelease(s.Pool, sel)
			if mark != "" {
				rel = append(rel[:len(rel)-1], chain(mark, rel[len(rel)-1])...)
			}
			out = append(out, notes...)
			out = append(out, rel...)
		} else {
			out = append(out, "# the topology controller rolls the MachineDeployments to the Cluster's version")
		}
		out = append(out,
			fmt.Sprintf("%s -n %s get machinedeployments.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s -o wide   # each MachineDeployment's strategy (maxSurge, maxUnavailable) is its batch; wait until every replica is updated", r.kubectlMgmt(), sq(r.capiNS), sq(r.capiName)),
			fmt.Sprintf("clusterctl describe cluster %s -n %s --kubeconfig-context %s", sq(r.capiName), sq(r.capiNS), sq(phMgmt)))
	}
	if gpu {
		// Validate the new nodes before the gangs come back to them, and
		// only after the provider's update succeeded.
		gates := []string{validateCmd(sel, s)}
		if n := len(out); n > 0 && strings.HasPrefix(out[n-1], `[ "$(aws eks describe-update`) {
			gates = append([]string{out[n-1]}, gates...)
			out = out[:n-1]
		}
		out = append(out, reactivate(poolRun(s), gates...)...)
	}
	b.add(out...)
	return b
}

// providerPool is the provider's name of a pool: the pool's name where the
// provider's own label grouped the nodes (GKE sets cloud.google.com/gke-nodepool
// to the node pool's name, https://cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels;
// AKS kubernetes.azure.com/agentpool, and agentpool before it, to the
// node pool's, https://learn.microsoft.com/azure/aks/use-labels), else the
// placeholder: a value of another label (node.kubernetes.io/pool=pool-a)
// need not be the provider's name of anything.
func (r *renderer) providerPool(pool, placeholder string, labels ...string) string {
	pl := r.pools[pool]
	for _, l := range labels {
		if pl.Label == l && pool != NoPool {
			return pool
		}
	}
	return placeholder
}

// eksNodegroup rolls an EKS managed node group. A node group whose launch
// template names a custom AMI cannot take --kubernetes-version: a new
// launch template version with the new AMI is rolled instead ("If you need
// to update a custom AMI in a node group that was deployed with a launch
// template, then update your custom AMI, specify the new ID in a new version
// of the launch template, and then update the node group to the new version
// of the launch template":
// https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupVersion.html,
// read 2026-09-20).
func (r *renderer) eksNodegroup(s Step) []string {
	pl := r.pools[s.Pool]
	ng := r.providerPool(s.Pool, "<nodegroup-name>", labelEKSNodegroup, "alpha.eksctl.io/nodegroup-name")
	base := fmt.Sprintf("--region %s --cluster-name %s --nodegroup-name %s", sq(r.region), sq(r.cluster), sq(ng))
	out := []string{fmt.Sprintf("aws eks describe-nodegroup %s --query 'nodegroup.{updateConfig:updateConfig,launchTemplate:launchTemplate}'   # EKS's batch is updateConfig (1 node by default)", base)}
	if pl.LaunchTemplateNodes > 0 {
		out = append(out,
			"# the node group runs a launch template of yours: with a custom AMI in it, --kubernetes-version fails; roll a new launch template version with a "+s.To+" AMI:",
			fmt.Sprintf(`aws ec2 create-launch-template-version --region %s --launch-template-id %s --source-version %s --launch-template-data '{"ImageId":"<%s-ami-id>"}' --query LaunchTemplateVersion.VersionNumber --output text`, sq(r.region), sq("<launch-template-id>"), sq("<version-in-use>"), s.To),
			fmt.Sprintf("UPDATE_ID=$(aws eks update-nodegroup-version %s --launch-template %s --query update.id --output text)", base, sq("id=<launch-template-id>,version=<new-version>")))
	} else {
		out = append(out, fmt.Sprintf("UPDATE_ID=$(aws eks update-nodegroup-version %s --kubernetes-version %s --query update.id --output text)", base, s.To))
	}
	upd := fmt.Sprintf("aws eks describe-update --region %s --name %s --nodegroup-name %s --update-id \"$UPDATE_ID\"", sq(r.region), sq(r.cluster), sq(ng))
	return append(out,
		fmt.Sprintf("while [ \"$(%s --query update.status --output text)\" = InProgress ]; do sleep 60; done", upd),
		upd+" --query 'update.{status:status,errors:errors}'",
		updateSucceeded(upd))
}

// karpenterStep moves a Karpenter or EKS Auto Mode NodePool. A pool without
// GPUs drifts to the new AMI as its disruption budgets allow; a GPU pool's
// drift stays held while its units go one at a time: gang-drain stops the
// unit's gangs, deleting the unit's nodes hands them to Karpenter's own
// termination (https://karpenter.sh/docs/concepts/disruption/#manual-methods),
// and the reactivated gangs bring up new nodes at the new version.
func (r *renderer) karpenterStep(s Step, sel string, gpu bool) []string {
	rep := r.replacer(s.Pool)
	var out []string
	if !gpu {
		out = append(out, r.pdbBlockers(s.Pool, sel))
		switch rep {
		case replaceAutoMode:
			if r.held[s.Pool] {
				r.held[s.Pool] = false
				out = append(out, budgetRestore(s.Pool)...)
			}
			out = append(out, "# EKS Auto Mode replaces the drifted nodes with nodes for the new control plane, as many at once as the NodePool's disruption budgets allow (10% of nodes by default)")
		default:
			out = append(out, r.release(s.Pool)...)
			out = append(out, "# Karpenter replaces the drifted nodes, as many at once as the NodePool's disruption budgets allow (10% of nodes by default)")
		}
		return append(out, fmt.Sprintf("kubectl get nodeclaims -l karpenter.sh/nodepool=%s -o wide   # until every node is new", sq(s.Pool)))
	}
	if !r.held[s.Pool] || rep == replaceKarpenter {
		// Hold drift through the units (an Auto Mode pool is held already).
		out = append(out, r.budgetHold(s.Pool)...)
	}
	if rep == replaceKarpenter {
		out = append(out, r.release(s.Pool)...)
	}
	r.held[s.Pool] = false
	intro, unitSel, run := r.unitBlock(s, sel)
	if run == "" {
		run = poolRun(s)
	}
	out = append(out, intro...)
	out = append(out, r.unitPDB(unitSel), r.gangDrain(unitSel, run))
	if unitSel == "" {
		out = append(out, "kubectl delete nodes $NODES   # Karpenter terminates them")
	} else {
		out = append(out, fmt.Sprintf("kubectl delete nodes -l %s   # Karpenter terminates them", unitSel))
	}
	out = append(out, reactivate(run)...)
	out = append(out, fmt.Sprintf("kubectl get nodeclaims -l karpenter.sh/nodepool=%s -o wide   # the readmitted gangs bring up nodes at v%s; then the next one", sq(s.Pool), s.To))
	return append(out, budgetRestore(s.Pool)...)
}

// autoModeBuiltin reports whether a NodePool is one of EKS Auto Mode's
// built-in pools: "You cannot modify the built-in system and
// general-purpose node pools. You can only enable or disable them"
// (https://docs.aws.amazon.com/eks/latest/userguide/create-node-pool.html,
// read 2026-09-20).
func autoModeBuiltin(pool string) bool { return pool == "system" || pool == "general-purpose" }
