package skew

import (
	"fmt"
	"strings"
)

// Plan phases, in the order each control-plane hop runs them.
const (
	PhaseFix         = "fix"
	PhasePreflight   = "pre-flight"
	PhaseEtcd        = "etcd-snapshot"
	PhaseAPIServers  = "apiservers"
	PhaseControllers = "controllers"
	PhaseAddons      = "addons"
	PhaseNodePool    = "node-pool"
)

// Step is one action of an upgrade plan.
type Step struct {
	// Number counts steps from 1.
	Number int `json:"number"`
	// ControlPlane is the control-plane minor while the step runs: the hop
	// being made for control-plane steps, the minor reached for node steps.
	ControlPlane string `json:"controlPlane"`
	// Phase is fix, pre-flight, etcd-snapshot, hold-rollouts, apiservers,
	// controllers, control-plane, addons or node-pool.
	Phase string `json:"phase"`
	// Pool names the node pool of a node-pool step.
	Pool string `json:"pool,omitempty"`
	// From and To are the versions the step moves between.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Action says what to do.
	Action string `json:"action"`
	// Status is edge for a step that leaves no slack, violation for one
	// that repairs a current violation, ok otherwise.
	Status Status `json:"status"`
	// Note adds the why.
	Note string `json:"note,omitempty"`
	// Holds names the pools a hold-rollouts step keeps from rolling with
	// the control plane (each is released at its own node-pool step).
	Holds []string `json:"holds,omitempty"`
	// Blocks are the copy-paste units that do the step for the provider,
	// names filled in where the cluster shows them and quoted
	// '<placeholders>' where it does not, so that a pasted placeholder
	// fails with the tool's own message. Where the plan cannot tell which
	// of two ways applies, each way is a block of its own that says how to
	// tell (Block.Choice, Block.When).
	Blocks []Block `json:"blocks,omitempty"`
	// Commands are the lines of every block in order, for display; an
	// alternative's lines follow a comment that says when it applies.
	// Paste Blocks, not Commands.
	Commands []string `json:"commands,omitempty"`
	// Rollback is the step's way back and the trigger that starts it,
	// declared before the step runs.
	Rollback *Rollback `json:"rollback,omitempty"`
}

// PoolUpgrade is one upgrade of a node pool in a plan.
type PoolUpgrade struct {
	// Step is the plan step that does it.
	Step int `json:"step"`
	// From and To are kubelet minors.
	From string `json:"from"`
	To   string `json:"to"`
	// Before names the control-plane hop it must precede ("" for the last).
	Before string `json:"before,omitempty"`
}

// PoolPlan is what a plan does to one node pool.
type PoolPlan struct {
	// Name is the pool.
	Name string `json:"name"`
	// Nodes counts its nodes.
	Nodes int `json:"nodes"`
	// Kubelet is its oldest kubelet version now.
	Kubelet string `json:"kubelet,omitempty"`
	// Limit is how many minors it may lag.
	Limit int `json:"limit"`
	// MustUpgradeBefore is the first control-plane hop the pool at its
	// current version cannot survive: it must be upgraded before the hop
	// to this minor.
	MustUpgradeBefore string `json:"mustUpgradeBefore,omitempty"`
	// Upgrades are the skip-level plan's upgrades of this pool.
	Upgrades []PoolUpgrade `json:"upgrades"`
	// UpgradesEveryHop is how many upgrades following every control-plane
	// hop would take.
	UpgradesEveryHop int `json:"upgradesEveryHop"`
	// NodeDisruptionsSaved is (UpgradesEveryHop - len(Upgrades)) * Nodes.
	NodeDisruptionsSaved int `json:"nodeDisruptionsSaved"`
	// NoSlack is set when the pool sits exactly at the skew limit at some
	// point of the plan, so its upgrade cannot slip.
	NoSlack bool `json:"noSlack"`
	// Status: violation when out of policy now, edge without slack, ok.
	Status Status `json:"status"`
	// Note explains unknown versions and other caveats.
	Note string `json:"note,omitempty"`
}

// PlanSummary totals a plan.
type PlanSummary struct {
	// From is the control plane's minor now (its oldest apiserver).
	From string `json:"from"`
	// Target is the minor the plan reaches.
	Target string `json:"target"`
	// Hops counts control-plane hops.
	Hops int `json:"hops"`
	// PoolUpgrades counts pool upgrades in the skip-level plan.
	PoolUpgrades int `json:"poolUpgrades"`
	// PoolUpgradesEveryHop counts them when nodes follow every hop.
	PoolUpgradesEveryHop int `json:"poolUpgradesEveryHop"`
	// NodeDisruptions counts node drains in the skip-level plan.
	NodeDisruptions int `json:"nodeDisruptions"`
	// NodeDisruptionsEveryHop counts them when nodes follow every hop.
	NodeDisruptionsEveryHop int `json:"nodeDisruptionsEveryHop"`
	// NodeDisruptionsSaved is the difference.
	NodeDisruptionsSaved int `json:"nodeDisruptionsSaved"`
	// Status is the worst step status.
	Status Status `json:"status"`
}

// Plan is an upgrade plan from an inventory to a target minor.
type Plan struct {
	// Provider is who the commands are written for, and why.
	Provider Detection `json:"provider"`
	// Steps in the order to run them.
	Steps []Step `json:"steps"`
	// Pools says what the plan does to each node pool.
	Pools []PoolPlan `json:"pools"`
	// Warnings are the caveats of the plan.
	Warnings []string `json:"warnings,omitempty"`
	// Summary totals the plan.
	Summary PlanSummary `json:"summary"`
}

// PlanOptions tune a plan.
type PlanOptions struct {
	// Support, when set, annotates hops with their support windows.
	Support func(v Version) (Support, bool)
	// Provider is the detected (or chosen) provider; it decides the
	// commands of each step and which steps the provider does itself.
	Provider Provider
	// Providers is the provider data whose node skew limits hold the
	// pools (nil: the embedded providers.json).
	Providers *ProviderCalendar
	// ASGs names the EC2 Auto Scaling group of each pool whose nodes an
	// ASG makes (pool -> group): such a pool is replaced from a new AMI by
	// an instance refresh instead of upgraded in place. The cluster does
	// not show it: a Node carries no label of its group.
	ASGs map[string]string
}

// MakePlan plans the control plane from its oldest apiserver to target one
// minor at a time, with the order of operations for each hop, and upgrades
// each node pool as few times as possible: a pool waits until the next hop
// would put it beyond its skew limit, then jumps to the control plane's
// minor, and at the end goes to the target.
func MakePlan(inv Inventory, target Version, opts PlanOptions) (Plan, error) {
	oldest, newest, ok := inv.APIServerVersions()
	if !ok {
		return Plan{}, ErrNoAPIServer
	}
	target = target.MinorOnly()
	cur := oldest.MinorOnly()
	if target.MinorsAfter(newest.MinorOnly()) < 0 {
		return Plan{}, fmt.Errorf("target %s is older than the apiserver %s: downgrades are not planned", target.MinorString(), newest.MinorString())
	}
	if target.Major != cur.Major {
		return Plan{}, fmt.Errorf("target %s changes the major version: not planned", target.MinorString())
	}
	b := &planBuilder{}
	det := DetectProvider(inv)
	if opts.Provider != "" {
		det = Detection{Provider: opts.Provider, Source: "--provider"}
	}
	opts.Provider = det.Provider
	if err := checkASGs(inv, opts.Provider, opts.ASGs); err != nil {
		return Plan{}, err
	}
	provData := opts.Providers
	if provData == nil {
		d := DefaultProviderCalendar()
		provData = &d
	}
	maxSkew := func(v Version) int { return provData.NodeSkewLimit(opts.Provider, v) }
	several := severalAPIServers(inv, opts)
	p := Plan{Summary: PlanSummary{From: cur.MinorString(), Target: target.MinorString(), Hops: target.MinorsAfter(cur)}}
	if ns := provData.NodeSkewOf(opts.Provider); ns != nil && ns.MaxMinorsBehind < KubeletMaxSkew(target) {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s keeps node pools at most %s behind the control plane, tighter than the upstream %d (%s): the plan holds every pool to it", opts.Provider.Title(), Minors(ns.MaxMinorsBehind), KubeletMaxSkew(target), strings.Fields(ns.Source)[0]))
	}
	if p.Summary.Hops > 12 {
		return Plan{}, fmt.Errorf("target %s is %d minors ahead: plan at most 12 hops at a time", target.MinorString(), p.Summary.Hops)
	}

	// Pool state.
	type ps struct {
		plan PoolPlan
		v    Version // current kubelet minor during planning
		ok   bool
	}
	var pools []*ps
	inv.Pools = NormalizePools(inv.Pools)
	inv.Components = append([]Component(nil), inv.Components...)
	inv.Sort()
	for _, pl := range inv.Pools {
		s := &ps{plan: PoolPlan{Name: pl.Name, Nodes: pl.Nodes, Upgrades: []PoolUpgrade{}, Status: StatusOK}}
		lo, hi, ok := pl.MinMax()
		if ok {
			s.v, s.ok = lo.MinorOnly(), true
			s.plan.Kubelet = lo.String()
			s.plan.Limit = maxSkew(lo)
			if d := lo.MinorOnly().AddMinors(s.plan.Limit + 1); d.MinorsAfter(target) <= 0 {
				s.plan.MustUpgradeBefore = d.MinorString()
			}
			if hi.MinorsAfter(cur) > 0 {
				s.plan.Note = fmt.Sprintf("kubelets at %s are newer than the apiserver %s: out of policy until the control plane catches up", hi.MinorString(), cur.MinorString())
				s.plan.Status = StatusViolation
			}
		}
		if pl.Unknown > 0 {
			n := fmt.Sprintf("%s no parsable kubelet version and %s not planned", reportN(pl.Unknown), isAre(pl.Unknown))
			if s.plan.Note != "" {
				n = s.plan.Note + "; " + n
			}
			s.plan.Note = n
			p.Warnings = append(p.Warnings, fmt.Sprintf("pool %s: %s", pl.Name, n))
		}
		pools = append(pools, s)
	}

	upgrade := func(s *ps, to Version, before string, status Status, note string) {
		n := b.add(Step{ControlPlane: to.MinorString(), Phase: PhaseNodePool, Pool: s.plan.Name, From: s.v.MinorString(), To: to.MinorString(),
			Action: fmt.Sprintf("upgrade node pool %s (%s) from %s to %s", s.plan.Name, Nodes(s.plan.Nodes), s.v.MinorString(), to.MinorString()),
			Status: status, Note: note})
		s.plan.Upgrades = append(s.plan.Upgrades, PoolUpgrade{Step: n, From: s.v.MinorString(), To: to.MinorString(), Before: before})
		s.v = to
	}

	// Fix what is already out of policy against the newest apiserver.
	for _, s := range pools {
		if !s.ok {
			continue
		}
		if lim := maxSkew(s.v); newest.MinorsAfter(s.v) > lim {
			s.plan.Status = StatusViolation
			upgrade(s, cur, cur.AddMinors(1).MinorString(), StatusViolation,
				fmt.Sprintf("the pool is %s behind the apiserver %s, beyond the limit of %d: fix this before any control-plane hop", Minors(newest.MinorsAfter(s.v)), newest.MinorString(), lim))
		}
	}

	for _, s := range pools {
		if s.ok && newest.MinorsAfter(s.v) == maxSkew(s.v) {
			s.plan.NoSlack = true
		}
	}

	hopPools := func(next Version) {
		// Pools that cannot survive the hop to next go now, to the
		// control plane's current minor.
		for _, s := range pools {
			if !s.ok {
				continue
			}
			if note := followsEveryHop(opts.Provider, s.plan.Name, inv); note != "" {
				if next.MinorsAfter(s.v) > 1 {
					upgrade(s, next.AddMinors(-1), next.MinorString(), StatusOK, note)
				}
				continue
			}
			lim := maxSkew(s.v)
			if next.MinorsAfter(s.v) > lim {
				at := next.AddMinors(-1)
				upgrade(s, at, next.MinorString(), StatusEdge,
					fmt.Sprintf("skip-level: last moment; the hop to %s would put the pool %s behind (limit %d)", next.MinorString(), Minors(next.MinorsAfter(s.v)), lim))
			}
		}
	}

	for m := cur.AddMinors(1); m.MinorsAfter(target) <= 0; m = m.AddMinors(1) {
		hopPools(m)
		mm := m.MinorString()
		already := 0
		total := 0
		for _, c := range inv.Components {
			if c.Name == KindAPIServer && c.State == StateVisible {
				total++
				if v, err := ParseVersion(c.Version); err == nil && v.MinorsAfter(m) >= 0 {
					already++
				}
			}
		}
		hopNote := ""
		if opts.Support != nil {
			if s, ok := opts.Support(m); ok {
				hopNote = s.Message
			}
		}
		b.add(Step{ControlPlane: mm, Phase: PhasePreflight, To: mm, Status: StatusOK,
			Action: fmt.Sprintf("pre-flight for %s: removed APIs in use (kubectl deprecations --target v%s), addon and driver compatibility, webhook health", mm, mm),
			Note:   hopNote})
		b.add(Step{ControlPlane: mm, Phase: PhaseEtcd, To: mm, Status: StatusOK,
			Action: fmt.Sprintf("take and verify an etcd snapshot (etcd-pre-%s.db)", mm)})
		inst := "every kube-apiserver instance"
		switch {
		case total > 0 && already > 0:
			inst = fmt.Sprintf("the %s (%d of %d already on %s)", count(total-already, "remaining kube-apiserver instance"), already, total, mm)
		case total > 0:
			inst = "the " + count(total, "kube-apiserver instance")
		}
		apiStep := Step{ControlPlane: mm, Phase: PhaseAPIServers, To: mm, Status: StatusOK,
			Action: fmt.Sprintf("upgrade %s to %s one at a time, with a soak between", inst, mm)}
		if total == 1 && already == 0 {
			apiStep.Action = fmt.Sprintf("upgrade %s to %s", inst, mm)
		}
		if several {
			apiStep.Note = fmt.Sprintf("apiservers are mixed during this step: do not apply manifests that use APIs new in %s until every apiserver reports %s", mm, mm)
		}
		b.add(apiStep)
		b.add(Step{ControlPlane: mm, Phase: PhaseControllers, To: mm, Status: StatusOK,
			Action: fmt.Sprintf("upgrade kube-controller-manager, kube-scheduler and cloud-controller-manager to %s", mm),
			Note:   "only after every apiserver is on " + mm + ": controllers must never be newer than an apiserver"})
		b.add(Step{ControlPlane: mm, Phase: PhaseAddons, To: mm, Status: StatusOK,
			Action: fmt.Sprintf("upgrade kube-proxy, CoreDNS and the other addons to the versions %s supports", mm)})
		for _, s := range pools {
			if s.ok && m.MinorsAfter(s.v) == maxSkew(s.v) {
				s.plan.NoSlack = true
			}
		}
	}
	// Last wave: every pool to the target.
	for _, s := range pools {
		if s.ok && s.v.MinorsAfter(target) < 0 {
			note := "skip-level: one drain for the remaining hops"
			if slack := maxSkew(s.v) - target.MinorsAfter(s.v); slack > 0 {
				note = fmt.Sprintf("optional now: at %s the pool stays inside the policy with %s of slack; upgrading it keeps the cluster on one version", s.v.MinorString(), Minors(slack))
			}
			st := StatusOK
			if target.MinorsAfter(s.v) == maxSkew(s.v) {
				st = StatusEdge
				note = fmt.Sprintf("no slack: the pool is at the skew limit (%s behind %s); upgrade it before any further control-plane upgrade", Minors(maxSkew(s.v)), target.MinorString())
			}
			upgrade(s, target, "", st, note)
		}
	}

	for _, s := range pools {
		if s.ok {
			every := everyHop(MustParseVersion(s.plan.Kubelet).MinorOnly(), cur, newest.MinorOnly(), target, maxSkew)
			if every < len(s.plan.Upgrades) {
				every = len(s.plan.Upgrades)
			}
			s.plan.UpgradesEveryHop = every
			nodes := s.plan.Nodes - unknownOf(inv, s.plan.Name)
			drains := len(s.plan.Upgrades) * nodes
			if why := savingsNotHonoured(opts.Provider, s.plan.Name, inv); why != "" && every > len(s.plan.Upgrades) {
				// The provider replaces these nodes at the control
				// plane's version whatever the plan says: no drains
				// are saved.
				drains = every * nodes
				s.plan.Note = joinNote(s.plan.Note, why)
				p.Warnings = append(p.Warnings, fmt.Sprintf("pool %s: %s", s.plan.Name, why))
			}
			s.plan.NodeDisruptionsSaved = every*nodes - drains
			if s.plan.NoSlack && s.plan.Status == StatusOK {
				s.plan.Status = StatusEdge
			}
			p.Summary.PoolUpgrades += len(s.plan.Upgrades)
			p.Summary.PoolUpgradesEveryHop += every
			p.Summary.NodeDisruptions += drains
			p.Summary.NodeDisruptionsEveryHop += every * nodes
		}
		if s.plan.NoSlack {
			p.Warnings = append(p.Warnings, fmt.Sprintf("pool %s has no slack: it sits at the skew limit during the plan, so its upgrade cannot slip", s.plan.Name))
		}
		p.Pools = append(p.Pools, s.plan)
	}
	p.Summary.NodeDisruptionsSaved = p.Summary.NodeDisruptionsEveryHop - p.Summary.NodeDisruptions
	if p.Summary.Hops > 0 && several {
		p.Warnings = append(p.Warnings, "during each hop the HA apiservers are mixed: hold back manifests that use brand-new APIs until every apiserver is on the new minor")
	}
	if newest.MinorsAfter(oldest) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the control plane is mid-upgrade (apiservers at %s and %s): the first hop finishes it", oldest.MinorString(), newest.MinorString()))
	}
	if emulating(inv.Server) {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the apiserver emulates %s (KEP-4330): check the maturity of compatibility versions in %s before planning around them", inv.Server.EmulationVersion, cur.MinorString()))
	}
	if opts.Support != nil {
		if s, ok := opts.Support(target); ok && s.Status != StatusOK {
			p.Warnings = append(p.Warnings, "target "+s.Message)
		}
	}
	for _, c := range inv.Components {
		if (c.Name == KindControllerManager || c.Name == KindScheduler) && c.State == StateVisible {
			if v, err := ParseVersion(c.Version); err == nil && cur.MinorsAfter(v) > 0 {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s %s is behind the apiserver %s: bring it to %s before the first hop", c.Name, c.Instance, cur.MinorString(), cur.MinorString()))
			}
		}
	}
	p.Steps = b.steps
	p.Provider = det
	forProvider(&p, inv, opts.Provider, opts.ASGs)
	// Say up front why the plan reports a violation (kubectl skew plan
	// exits 1 on one with the default --fail-on).
	for _, pp := range p.Pools {
		if pp.Status != StatusViolation {
			continue
		}
		w := fmt.Sprintf("pool %s is out of policy now", pp.Name)
		if len(pp.Upgrades) > 0 {
			w += fmt.Sprintf(" (%s); step %d repairs it before anything else moves, and the plan reports a violation until it has", p.Steps[pp.Upgrades[0].Step-1].Note, pp.Upgrades[0].Step)
		} else if pp.Note != "" {
			w += fmt.Sprintf(" (%s); no step can repair it, and the plan reports a violation until it is repaired by hand", pp.Note)
		}
		p.Warnings = append([]string{w}, p.Warnings...)
	}
	p.Summary.Status = StatusOK
	for _, s := range p.Steps {
		p.Summary.Status = worse(p.Summary.Status, s.Status)
	}
	for _, pp := range p.Pools {
		p.Summary.Status = worse(p.Summary.Status, pp.Status)
	}
	return p, nil
}

// everyHop counts the upgrades of a pool at v when its nodes follow every
// control-plane hop from cur to target: one catch-up first when the pool is
// out of policy or could not survive the first hop, then one per hop it is
// behind.
func everyHop(v, cur, newest, target Version, maxSkew func(Version) int) int {
	n := 0
	if newest.MinorsAfter(v) > maxSkew(v) || (target.MinorsAfter(cur) > 0 && cur.AddMinors(1).MinorsAfter(v) > maxSkew(v)) {
		n++
		v = cur
	}
	for m := cur.AddMinors(1); m.MinorsAfter(target) <= 0; m = m.AddMinors(1) {
		if v.MinorsAfter(m) < 0 {
			n++
			v = m
		}
	}
	if v.MinorsAfter(target) < 0 {
		n++
	}
	return n
}

func unknownOf(inv Inventory, pool string) int {
	for _, p := range inv.Pools {
		if p.Name == pool {
			return p.Unknown
		}
	}
	return 0
}

type planBuilder struct{ steps []Step }

func (b *planBuilder) add(s Step) int {
	s.Number = len(b.steps) + 1
	s.Action = strings.TrimSpace(s.Action)
	b.steps = append(b.steps, s)
	return s.Number
}

// severalAPIServers says whether more than one kube-apiserver instance
// exists or may exist: more than one is visible, or none is visible
// because reading kube-system was forbidden, or the provider runs a
// managed control plane with several instances.
func severalAPIServers(inv Inventory, opts PlanOptions) bool {
	visible, forbidden := 0, false
	for _, c := range inv.Components {
		if c.Name != KindAPIServer {
			continue
		}
		switch c.State {
		case StateVisible:
			visible++
		case StateForbidden:
			forbidden = true
		}
	}
	if visible > 0 {
		return visible > 1
	}
	return forbidden || managedSeveral(opts.Provider)
}

// count writes "1 thing" or "n things".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func reportN(n int) string {
	if n == 1 {
		return "1 node reports"
	}
	return fmt.Sprintf("%d nodes report", n)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// followsEveryHop says why a pool must be on the control plane's minor
// before the next hop, or "". On a Cluster API ClusterClass cluster the
// Cluster webhook refuses to raise spec.topology.version while any
// MachineDeployment is not at the current version ("there are still
// MachineDeployments completing a previous upgrade";
// kubernetes-sigs/cluster-api v1.14.0 core/webhooks/admission/cluster.go,
// validateTopologyMachineDeploymentVersions, as in v1.10.0
// internal/webhooks/cluster.go): deferring a MachineDeployment's upgrade
// holds it within one hop, never across two.
// KubeadmControlPlane replaces the control-plane machines at every hop.
//
// On EKS, UpdateClusterVersion is refused while a managed node group is
// not on the cluster's current minor ("Nodegroups NAME must be updated to
// match cluster version X before updating cluster version"): "make sure
// that the Kubernetes minor version of both the managed nodes and Fargate
// nodes in your cluster are the same as your control plane's current
// version" (https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html,
// read 2026-12-06). Self-managed node groups follow the same hops: the
// inventory cannot tell them from managed ones by label, and keeping one
// behind would save a drain only where the API does not check. Karpenter
// and Auto Mode pools are not node groups.
func followsEveryHop(p Provider, pool string, inv Inventory) string {
	if pool == NoPool {
		return ""
	}
	if p == ProviderEKS {
		for _, pl := range inv.Pools {
			if pl.Name == pool && pl.Label != labelKarpenterPool {
				return "EKS: update-cluster-version is refused while a node group is not on the control plane's current minor (https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html), so the pool follows every hop"
			}
		}
		return ""
	}
	if p != ProviderCAPI {
		return ""
	}
	for _, pl := range inv.Pools {
		if pl.Name == pool && (pl.Label == controlPlaneRoles[0] || pl.Label == controlPlaneRoles[1]) {
			return "Cluster API: KubeadmControlPlane replaces the control-plane machines at every hop"
		}
	}
	return "Cluster API: the Cluster's webhook refuses the next topology version while a MachineDeployment is not on the current one, so the pool follows every hop"
}

// savingsNotHonoured says why the provider will not keep a pool behind the
// control plane, or "": EKS Auto Mode enforces a 21-day maximum node
// lifetime and replaces expired nodes with nodes of the control plane's
// version, and NodePool disruption budgets do not hold expiration
// (https://docs.aws.amazon.com/eks/latest/userguide/automode.html,
// https://docs.aws.amazon.com/eks/latest/userguide/auto-upgrade.html,
// https://karpenter.sh/docs/concepts/disruption/#nodepool-disruption-budgets,
// read 2026-09-20).
func savingsNotHonoured(p Provider, pool string, inv Inventory) string {
	if p != ProviderEKS {
		return ""
	}
	for _, pl := range inv.Pools {
		if pl.Name == pool && pl.AutoModeNodes > 0 {
			return "EKS Auto Mode replaces every node within its 21-day lifetime with one of the control plane's version, whatever the disruption budget: no drains are saved by keeping the pool behind"
		}
	}
	return ""
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
