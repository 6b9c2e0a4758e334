package skew

// Inference pools in the runbook. A GPU pool whose nodes hold model
// Deployments behind PodDisruptionBudgets and no training gang drains as an
// inference pool (`kubectl gang-drain run --inference`, pkg/inference):
// the models surge first where GPUs are free outside the pool, and the
// nodes go in waves paced by the bandwidth their weights load over, rather
// than one fabric unit at a time with the gang drain. pkg/inference tells
// such a pool (Detect) and plans its drain (Compute); the inventory records
// the answer (Pool.Inference), so that a runbook made offline from a saved
// report gives the same commands, and the fleet plan adds the drain's ETA
// to the pool's drain step.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// InferencePool is what the inventory read of a GPU pool that holds
// inference workloads: model Deployments (pods asking for GPUs) behind
// PodDisruptionBudgets and no training gang.
type InferencePool struct {
	// Models counts the model Deployments with a replica on the pool and
	// WithPDB those whose PodDisruptionBudget keeps at least one of their
	// own replicas (not one shared with models that cover its floor).
	Models  int `json:"models"`
	WithPDB int `json:"withPDB"`
	// Reason says why it is one, as pkg/inference's Detect words it.
	Reason string `json:"reason"`
	// Sources are the weight sources its models load from (object-store,
	// registry, shared-fs): the drain needs a hydrate bandwidth for each.
	Sources []string `json:"sources,omitempty"`
	// Bandwidth is the --hydrate-bandwidth value the drain was planned
	// with (Collector.InferenceOptions); "" when none was given.
	Bandwidth string `json:"bandwidth,omitempty"`
	// Waves are the planned drain's waves and ETASeconds its ETA: the
	// cold start of the surge and of every wave, bytes over bandwidth
	// (pkg/inference's Compute); 0 without a bandwidth.
	Waves      int     `json:"waves"`
	ETASeconds float64 `json:"etaSeconds,omitempty"`
	// Refusals are why `kubectl gang-drain plan --inference` would refuse
	// the drain as read (a model without a weight size, a source without a
	// bandwidth, a wave below a budget).
	Refusals []string `json:"refusals,omitempty"`
}

// EveryModelBudgeted reports whether the pool holds models and every one
// is behind a PodDisruptionBudget that keeps one of its own replicas: only
// then is each model's floor in the inference drain its budget, and only
// then do the runbook and the fleet programme drain the pool as an
// inference pool.
func (p *InferencePool) EveryModelBudgeted() bool {
	return p != nil && p.Models > 0 && p.WithPDB >= p.Models
}

// ETA is the planned drain's ETA, 0 when it is not known.
func (p *InferencePool) ETA() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.ETASeconds * float64(time.Second)).Round(time.Second)
}

// inferenceCost is what a GPU pool is drained as when its models cannot
// be read.
const inferenceCost = "the runbook drains it as a training pool (kubectl gang-drain run)"

// inferencePools reads, with Collector.Inference, every GPU pool that a
// selector picks for the workloads pkg/inference drains, and records an
// inference pool's answer on it. It costs one pod list, paged as the node
// list is (PageSize), shared by every GPU pool with the inventory's own
// node list, then per GPU pool what pkg/inference's Reader reads beside
// them (the ReplicaSets, Deployments, HorizontalPodAutoscalers and
// PodDisruptionBudgets of the namespaces with pods on the pool), and only for a pool that holds models behind budgets
// beside other pods, pkg/gang's discovery of training gangs (a pod list per
// node). It returns notes for what it could not read, each naming the
// forbidden verb and resource as the API words it.
func (c *Collector) inferencePools(ctx context.Context, pools []Pool) []string {
	if !c.Inference {
		return nil
	}
	byPool := map[poolKey][]string{}
	for n, k := range c.nodePool {
		byPool[k] = append(byPool[k], n)
	}
	var (
		notes  []string
		listed *inference.Listed
		err    error
	)
	for i := range pools {
		pl := &pools[i]
		if pl.ControlPlane() || pl.Selector() == "" || pl.GPUNodes == nil || *pl.GPUNodes == 0 {
			continue
		}
		if listed == nil && err == nil {
			// One node list (the inventory's own) and one pod list, paged
			// as the inventory pages, for every GPU pool.
			listed = &inference.Listed{Nodes: c.listedNodes}
			listed.Pods, err = inference.ListPods(ctx, c.Client, c.pageSize())
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("pool %s: reading its model Deployments for an inference drain: %v; %s", pl.Name, err, inferenceCost))
			continue
		}
		nodes := byPool[poolKey{pl.Name, pl.Label}]
		sort.Strings(nodes)
		ip, ns := c.inferencePool(ctx, pl.Name, nodes, listed)
		pl.Inference = ip
		notes = append(notes, ns...)
	}
	return notes
}

// inferencePool classifies one GPU pool with pkg/inference and, for an
// inference pool, plans its drain.
func (c *Collector) inferencePool(ctx context.Context, name string, nodes []string, listed *inference.Listed) (*InferencePool, []string) {
	r := &inference.Reader{Kube: c.Client, Listed: listed}
	pool, err := r.Read(ctx, nodes)
	if err != nil {
		return nil, []string{fmt.Sprintf("pool %s: reading its model Deployments for an inference drain: %v; %s", name, err, inferenceCost)}
	}
	det := inference.Detect(pool)
	if det.Inference && len(pool.OtherPods) > 0 {
		// Pods beside the models may be training gangs' ranks, which only
		// pkg/gang's discovery tells (it reads their owners).
		dyn := c.InferenceDynamic
		if dyn == nil {
			dyn = c.Dynamic
		}
		if dyn == nil {
			return nil, []string{fmt.Sprintf("pool %s: %s, beside %d other pod(s) that may be training gangs, which this read cannot tell without a dynamic client; %s", name, det.Reason, len(pool.OtherPods), inferenceCost)}
		}
		r.Discoverer = &gang.Discoverer{Kube: c.Client, Dynamic: dyn}
		if pool, err = r.Read(ctx, nodes); err != nil {
			return nil, []string{fmt.Sprintf("pool %s: looking for training gangs beside its models: %v; %s", name, err, inferenceCost)}
		}
		det = inference.Detect(pool)
	}
	var notes []string
	for _, n := range pool.Notes {
		notes = append(notes, "pool "+name+": "+n)
	}
	if !det.Inference {
		return nil, notes
	}
	plan := inference.Compute(pool, c.InferenceOptions)
	ip := &InferencePool{Models: det.Models, Reason: det.Reason, Waves: len(plan.Waves), ETASeconds: plan.ETASeconds, Refusals: plan.Refusals}
	// A model counts as budgeted when its budget keeps at least one of its
	// own replicas: a budget whose other models, or pods it selects
	// outside the models, cover its floor alone at their expected count
	// lets every replica of this one go (docs/inference.md).
	for _, m := range plan.Models {
		if m.PDB != "" && m.PDBFloor >= 1 {
			ip.WithPDB++
		}
	}
	if a := c.InferenceOptions.Bandwidth.Args(); len(a) == 2 {
		ip.Bandwidth = a[1]
	}
	seen := map[string]bool{}
	for _, m := range plan.Models {
		if m.Weights != nil && !seen[string(m.Weights.Source)] {
			seen[string(m.Weights.Source)] = true
			ip.Sources = append(ip.Sources, string(m.Weights.Source))
		}
	}
	sort.Strings(ip.Sources)
	return ip, notes
}

// inferencePool reports whether the runbook drains a pool as an inference
// pool: one the inventory says holds inference workloads, whose nodes this
// runbook drains or a provider replaces as a whole. An Auto Scaling
// group's instance refresh, which drains each node as its instance waits
// to terminate, and an EKS Auto Mode built-in NodePool, which no one
// drains, keep their own steps.
func (r *renderer) inferencePool(pool string) bool {
	pl, ok := r.pools[pool]
	if !ok || !pl.Inference.EveryModelBudgeted() || r.controlPlanePool(pool) || r.asgOf(pool) != "" {
		return false
	}
	return !(r.replacer(pool) == replaceAutoMode && autoModeBuiltin(pool))
}

// inferenceDrain is the drain of a whole inference pool: the plan as the
// gate (it exits non-zero when it would take a model below its floor),
// then the paced run, both with the hydrate bandwidth the reader sets.
func (r *renderer) inferenceDrain(s Step, sel string) []string {
	ip := r.pools[s.Pool].Inference
	words := fmt.Sprintf("# %s holds inference workloads (%s): it drains as an inference pool, the models surged first where GPUs of their product are free outside it and the nodes in waves paced by weight-hydrate bandwidth, each once the replicas the previous one displaced are Ready elsewhere (docs/inference.md), not one fabric unit at a time", s.Pool, ip.Reason)
	bw := ip.Bandwidth
	bwLine := "BW=" + sq(bw) + "   # the hydrate bandwidth it was planned with when the inventory was read"
	if bw == "" {
		srcs := ip.Sources
		if len(srcs) == 0 {
			srcs = []string{string(inference.SourceObjectStore)}
		}
		var parts []string
		for _, src := range srcs {
			parts = append(parts, src+"=<bytes-per-second>")
		}
		bwLine = "BW=" + sq(strings.Join(parts, ",")) + "   # what each weight source serves the cluster at once, e.g. object-store=1250M/s"
	}
	out := []string{words}
	if ip.ETASeconds > 0 {
		out = append(out, fmt.Sprintf("# planned when the inventory was read: %d wave(s), ETA %s of cold starts", ip.Waves, ip.ETA()))
	}
	// pkg/inference's RunArgs are the run's own flags; the bandwidth is a
	// shell variable here, so that the reader sets it once for both.
	args := inference.RunArgs(sel, inference.Options{})
	plan := append([]string{"plan"}, args[1:]...)
	timeout, why := inferenceTimeout(ip)
	run := append(append([]string(nil), args...), "--run-id", poolRun(s), "--timeout", timeout)
	out = append(out, bwLine,
		fmt.Sprintf("kubectl pdb-blockers -l %s --drain-timeout %s   # gang-drain run --timeout %s below (%s); a run stopped by its --timeout exits 4 with the pool part drained and resumes when run again", sel, timeout, timeout, why))
	return append(out, chain(
		"kubectl gang-drain "+strings.Join(plan, " ")+` --hydrate-bandwidth "$BW"   # the gate: refuses a drain that takes a model below its PodDisruptionBudget (every model on the pool has one; a pool with a model without one keeps the gang drain)`,
		"kubectl gang-drain "+strings.Join(run, " ")+` --hydrate-bandwidth "$BW"`)...)
}

// inferenceSplitLabel is the node label the reader sets to move an
// inference pool upgraded in place in parts.
const inferenceSplitLabel = "gpufleet.dev/inference-part"

// inferenceSplit is the way on where the gate refuses the whole pool
// because the models' replicas cannot all fit outside it: the pool moved
// in parts, each labelled, drained, upgraded, validated and restored under
// its own run before the next, so that the next part's replicas find the
// upgraded nodes of the one before.
func (r *renderer) inferenceSplit(s Step, sel string) []string {
	timeout, _ := inferenceTimeout(r.pools[s.Pool].Inference)
	part := sel + "," + inferenceSplitLabel + "=1"
	run := strings.TrimSuffix(poolRun(s), `"`) + `-part1"`
	return []string{
		"# where the plan refuses (replicas that cannot all fit outside the pool): move the pool in parts instead, each as small as the plan accepts, drained, upgraded (the blocks below, on its nodes only), validated and restored before the next part, whose replicas then find the upgraded nodes:",
		fmt.Sprintf("#   kubectl label nodes %s %s %s=1   # the first part; then =2 on the next, and so on", phNode, phNode, inferenceSplitLabel),
		fmt.Sprintf(`#   kubectl gang-drain plan --inference -l %s --hydrate-bandwidth "$BW" && kubectl gang-drain run --inference -l %s --run-id %s --timeout %s --hydrate-bandwidth "$BW"`, sq(part), sq(part), run, timeout),
		fmt.Sprintf(`#   then on its nodes the upgrade below, and here: kubectl gpu-validate nodes -l %s --kubelet-version v%s %s && kubectl gang-drain restore %s --inference`, sq(part), s.To, validateChecks, run),
		fmt.Sprintf("#   kubectl label nodes -l %s %s-   # once every part is restored", sel, inferenceSplitLabel),
	}
}

// inferenceTimeoutUnknown bounds the run of a pool whose ETA is not known
// (no hydrate bandwidth when the inventory was read): a pool's waves of
// cold starts can take hours, well past the 1h of the runbook's other
// drains.
const inferenceTimeoutUnknown = 12 * time.Hour

// inferenceTimeout is the --timeout of a pool's inference run: twice the
// planned ETA and an hour more for the evictions and scheduling around the
// cold starts, rounded up to a quarter hour; inferenceTimeoutUnknown when
// the ETA is not known. It also says why, for the step's text.
func inferenceTimeout(ip *InferencePool) (string, string) {
	eta := ip.ETA()
	if eta <= 0 {
		return durationWord(inferenceTimeoutUnknown), "no planned ETA: a bound well above a pool's hours of cold starts"
	}
	q := 15 * time.Minute
	d := (2*eta + time.Hour + q - 1) / q * q
	return durationWord(d), fmt.Sprintf("twice the planned ETA %s and an hour", eta)
}

// durationWord is d as a Go duration without its zero tails: 2h30m, 12h.
func durationWord(d time.Duration) string {
	w := d.String()
	if strings.HasSuffix(w, "m0s") {
		w = strings.TrimSuffix(w, "0s")
	}
	if strings.HasSuffix(w, "h0m") {
		w = strings.TrimSuffix(w, "0m")
	}
	return w
}

// inferenceDrained is the check at the top of a block that upgrades a
// node of an inference pool in place: the node must be cordoned and run no
// pod but DaemonSets' and static ones, i.e. the run drained it. A run that
// stopped at its --timeout ends the drain block's && chain, and the next
// block, pasted on, would otherwise reset a node that still serves.
func inferenceDrained() []string {
	return []string{
		"# here, first, for the node: the check that the run above drained it (cordoned, no pod on it but DaemonSets' and static ones); where it refuses, run the drain block again (the same --run-id resumes the run), never reset the node:",
		"NODE=" + sq(phNode),
		`{ ` + nodeDrainedTest + ` || { echo "$NODE is not drained by the inference run (not cordoned, or pods other than DaemonSets' and static ones run on it): run the drain again before upgrading it" >&2; false; }; }`,
	}
}

// nodeDrainedTest is true when node $NODE is cordoned and runs no pod but
// DaemonSets' and static ones (owner kind Node), i.e. a run drained it.
const nodeDrainedTest = `[ "$(kubectl get node "$NODE" -o jsonpath='{.spec.unschedulable}')" = true ] && [ -z "$(kubectl get pods -A --field-selector "spec.nodeName=$NODE,status.phase!=Succeeded,status.phase!=Failed" -o jsonpath='{range .items[*]}{.metadata.ownerReferences[0].kind}{"\n"}{end}' | grep -vx -e DaemonSet -e Node)" ]`

// inferenceRestore validates the pool's nodes and undoes what the run left:
// it uncordons them. A run that completed has already scaled its surge back
// (pkg/inference's Runner.Run, once the last wave's replicas are Ready);
// restore --inference scales back only a surge a run left in place, one
// stopped before its end.
func inferenceRestore(s Step, sel string, gates ...string) []string {
	run := poolRun(s)
	gates = append(gates, validateCmd(sel, s), "kubectl gang-drain restore "+run+" --inference --dry-run", "kubectl gang-drain restore "+run+" --inference")
	return append([]string{"# once the nodes pass validation: uncordon them (a completed run has scaled its surge back already; restore --inference scales back only a surge a run stopped before its end left in place):"}, chain(gates...)...)
}

// inferenceStep moves an inference pool: the paced drain of the whole
// pool, the upgrade (in place node by node, or the provider's rollout of
// nodes that hold no model any more), then validation and the restore.
// It validates the pool itself.
func (r *renderer) inferenceStep(s Step, sel string) blocks {
	var b blocks
	switch rep := r.replacer(s.Pool); rep {
	case replaceInPlace:
		b.add(r.inferenceDrain(s, sel)...)
		b.add(r.inferenceSplit(s, sel)...)
		b.cut()
		on := fmt.Sprintf("# on each node of the pool (kubectl get nodes -l %s -o name), all drained by the run above:", sel)
		b.add(on)
		b.add(inferenceDrained()...)
		b.join(r.onNode(s, on, "nodes -l "+sel))
		b.cut()
		b.add("# here, once every node is upgraded:")
		b.add(inferenceRestore(s, sel)...)
		if c := r.statefulAfter(s.Pool, "the inference drain moves the pool whole", "once the pool is restored"); c != nil {
			b.cut()
			b.add(c...)
		}
	case replaceKarpenter, replaceAutoMode:
		var out []string
		if !r.held[s.Pool] || rep == replaceKarpenter {
			out = append(out, r.budgetHold(s.Pool)...)
		}
		if rep == replaceKarpenter {
			out = append(out, r.release(s.Pool)...)
		}
		r.held[s.Pool] = false
		out = append(out, fmt.Sprintf("OLD=$(kubectl get nodes -l %s -o name)   # the nodes the run below drains, the only ones to delete", sel))
		out = append(out, r.inferenceDrain(s, sel)...)
		out = append(out, karpenterInferenceNodes(s, sel)...)
		out = append(out, "# once the pool's new nodes, if any, pass validation: uncordon (a completed run has scaled its surge back already; restore --inference scales back only a surge a run stopped before its end left in place):")
		out = append(out, chain(
			`{ [ -z "$NEW" ] || `+validateCmd(sel, s)+`; }`,
			"kubectl gang-drain restore "+poolRun(s)+" --inference --dry-run",
			"kubectl gang-drain restore "+poolRun(s)+" --inference")...)
		b.add(append(out, budgetRestore(s.Pool)...)...)
	default:
		b.add(r.inferenceDrain(s, sel)...)
		b.cut()
		// The provider's rollout as for a pool without gangs: it finds the
		// nodes drained and replaces them.
		roll := r.providerRollout(s, sel, false)
		var gates []string
		if n := len(roll); n > 0 {
			last := &roll[n-1]
			if m := len(last.Commands); m > 0 && strings.HasPrefix(last.Commands[m-1], `[ "$(aws eks describe-update`) {
				gates = append(gates, last.Commands[m-1])
				last.Commands = last.Commands[:m-1]
			}
		}
		b.join(roll)
		b.add(inferenceRestore(s, sel, gates...)...)
	}
	return b
}

// karpenterInferenceNodes deletes the nodes a paced run drained from a
// Karpenter (or EKS Auto Mode) pool and waits on what the run caused, not
// on NodeClaims it may never have made. The run waits, wave by wave, until
// the displaced replicas are Ready elsewhere: where the surge and the free
// GPUs outside the pool held them all, no pod was ever Pending for the
// pool and Karpenter launched no node (it provisions for pending pods
// only, Karpenter v1 docs "Scheduling"); where they went Pending, Karpenter
// launched nodes at the released version, in the pool and Ready before
// the run went on. So only the old nodes are deleted (a selector would
// take the new ones too), and the nodes left in the pool are those new
// ones: the wait and the validation cover them, or say there are none.
func karpenterInferenceNodes(s Step, sel string) []string {
	return []string{
		// Pasted, this line runs even where the run above stopped (a
		// refused plan, --timeout, Ctrl-C): deleting a node the run did not
		// drain makes Karpenter drain it itself, unpaced (Karpenter v1
		// docs, "Disruption", termination controller). So every node is
		// checked first, as the in-place path checks each one.
		`BAD=$(for n in $OLD; do NODE=${n#node/}; ` + nodeDrainedTest + ` || echo "$NODE"; done)   # the old nodes the run has not drained`,
		`if [ -z "$BAD" ]; then kubectl delete $OLD; else echo "not drained by the inference run: $BAD; run the drain above again (the same --run-id resumes it), never delete a node that still serves" >&2; false; fi   # Karpenter terminates the drained nodes; the ones it launched during the run for replicas left Pending are already at v` + s.To,
		fmt.Sprintf("NEW=$(kubectl get nodes -l %s -o name)   # the nodes Karpenter launched for the run's displaced replicas (kubectl get nodeclaims -l karpenter.sh/nodepool=%s -o wide)", sel, sq(s.Pool)),
		fmt.Sprintf(`[ -n "$NEW" ] || echo "no node left in %s: the surge and free GPUs outside it held every replica, so Karpenter launched none; it launches nodes at v%s when pods next ask for the pool"`, s.Pool, s.To),
		`[ -z "$NEW" ] || kubectl wait --for=condition=Ready $NEW --timeout=30m   # the run waited for the replicas on them, so they are Ready already`,
	}
}

// inferenceBackDrain drains an inference pool's old nodes (selector sel,
// as the shell reads it) under run, paced as the step's drain is, once
// gate passes, and scales the surge back once the run is done.
func (r *renderer) inferenceBackDrain(s Step, sel, run, gate string) []string {
	ip := r.pools[s.Pool].Inference
	bw := ip.Bandwidth
	if bw == "" {
		bw = "<source>=<bytes-per-second>"
	}
	timeout, _ := inferenceTimeout(ip)
	return append([]string{"BW=" + sq(bw) + "   # the hydrate bandwidth of the step's drain"}, chain(
		gate,
		fmt.Sprintf(`kubectl gang-drain plan --inference -l %s --hydrate-bandwidth "$BW"`, sel),
		fmt.Sprintf(`kubectl gang-drain run --inference -l %s --run-id %s --timeout %s --hydrate-bandwidth "$BW"`, sel, run, timeout),
		"kubectl gang-drain restore "+run+" --inference")...)
}

// inferenceBack takes an inference pool upgraded in place back to prev
// under the step's own run: where its validation failed the pool is still
// drained by that run (the restore is chained to the validation), and a
// run of another id would be refused as conflicting. The same run again
// resumes it, or drains the pool afresh, paced, where it was restored;
// each node gets the prev kubelet, and the restore follows validation at
// prev.
func (r *renderer) inferenceBack(b *blocks, s Step, prev string) {
	sel := r.selector(s.Pool)
	b.add(fmt.Sprintf("# the pool, under the step's own inference run, which still holds it where its validation failed: drained (or kept drained), a v%s kubelet on each node, restored once it validates at v%s; a kubelet one minor older than the control plane stays inside the skew", prev, prev))
	b.add(r.inferenceDrain(s, sel)...)
	b.cut()
	b.add(fmt.Sprintf("# on each node of the pool (kubectl get nodes -l %s -o name):", sel))
	b.add(inferenceDrained()...)
	r.kubeletBack(b, s, prev)
	b.cut()
	b.add("# here:")
	run := poolRun(s)
	b.add(chain(fmt.Sprintf("kubectl gpu-validate nodes -l %s --kubelet-version v%s %s", sel, prev, validateChecks), "kubectl gang-drain restore "+run+" --inference")...)
}

// ReadForInference reports whether the inventory's GPU pools were read for
// inference workloads: InferenceRead, or, in a report saved before that
// field existed, a pool that carries its inference read.
func (inv Inventory) ReadForInference() bool {
	if inv.InferenceRead {
		return true
	}
	for _, pl := range inv.Pools {
		if pl.Inference != nil {
			return true
		}
	}
	return false
}

// NoInferenceRead is the warning for a plan made from a saved inventory
// whose GPU pools were not read for inference workloads (the version
// check's report, kubectl skew -o yaml, does not read them): the plan
// drains every GPU pool as a training pool, though one that serves models
// behind budgets drains as an inference pool when planned live. report
// names the saved report ("the saved report FILE") and live the command
// that plans it live. "" when the inventory was read, or has no GPU pool
// that a drain step could select. `kubectl skew plan --from-file` and
// `kubectl skew fleet plan --from-dir` both warn with it.
func NoInferenceRead(inv Inventory, report, live string) string {
	if inv.ReadForInference() {
		return ""
	}
	var unread []string
	for _, pl := range inv.Pools {
		if !pl.ControlPlane() && pl.Selector() != "" && pl.GPUNodes != nil && *pl.GPUNodes > 0 {
			unread = append(unread, pl.Name)
		}
	}
	if len(unread) == 0 {
		return ""
	}
	return fmt.Sprintf("GPU pool(s) %s: %s holds no read of their workloads (kubectl skew -o yaml does not read model Deployments), so this plan drains them as training pools (kubectl gang-drain run); a pool that serves models behind PodDisruptionBudgets must be planned live (%s) to drain paced by hydrate bandwidth (gang-drain run --inference) with its ETA",
		strings.Join(unread, ", "), report, live)
}
