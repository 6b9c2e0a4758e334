package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// PlanNode is one chosen node in a plan.
type PlanNode struct {
	Node          string    `json:"node"`
	GPUs          int64     `json:"gpus"`
	Unschedulable bool      `json:"unschedulable"`
	RunID         string    `json:"runID,omitempty"`
	State         NodeState `json:"state,omitempty"`
	GangPods      int       `json:"gangPods"`
	OtherPods     int       `json:"otherPods"`
	// Selected is false when --max-unavailable-gpus leaves the node for a
	// later run.
	Selected bool `json:"selected"`
}

// PlanGang is one gang in a plan.
type PlanGang struct {
	*Gang
	Support checkpoint.Support `json:"protocol"`
	// LastCheckpoint is the latest durable checkpoint the gang reported.
	LastCheckpoint time.Time `json:"lastCheckpoint,omitzero"`
	// LastCheckpointAgeSeconds is how old it is (or, when unknown, how long
	// the gang has run: the most a plain drain can lose).
	LastCheckpointAgeSeconds int64 `json:"lastCheckpointAgeSeconds"`
	// LastCheckpointKnown is false when the age is the gang's run time.
	LastCheckpointKnown bool `json:"lastCheckpointKnown"`
	// PlainDrainLossGPUHours is GPUs x the checkpoint age: what one evicted
	// rank costs when the whole gang restarts from its last checkpoint.
	PlainDrainLossGPUHours float64 `json:"plainDrainLossGPUHours"`
	// YieldLossGPUHours is the expected loss with checkpoint-and-yield: zero
	// for a gang that checkpoints on request, the plain loss for one that
	// does not and is stopped anyway.
	YieldLossGPUHours float64 `json:"yieldLossGPUHours"`
	// CheckpointStatus is the responder's latest answer, if any.
	CheckpointStatus checkpoint.Status `json:"checkpointStatus,omitempty"`
	// Path is how the gang can save its work when it is stopped.
	Path SavePath `json:"path"`
	// GracePeriodSeconds is the shortest terminationGracePeriodSeconds of
	// its pods: the time every rank has between SIGTERM and SIGKILL.
	GracePeriodSeconds int64 `json:"gracePeriodSeconds"`
}

// SavePath is how a gang can save its work before it is stopped.
type SavePath string

// Save paths.
const (
	// PathProtocol: the gang answers checkpoint-and-yield requests.
	PathProtocol SavePath = "checkpoint-and-yield"
	// PathSIGTERM: no responder, but the pods ask for more time to stop
	// than the Kubernetes default; since the gang is stopped as a unit,
	// every rank gets SIGTERM together and a trainer that saves on SIGTERM
	// within the grace period loses nothing.
	PathSIGTERM SavePath = "sigterm"
	// PathNone: neither; the work since the last checkpoint is lost.
	PathNone SavePath = "none"
)

// savePath decides a gang's path: the protocol when it is labelled as
// speaking it or has answered a request before; else SIGTERM when every
// pod's grace period is longer than the Kubernetes default (someone asked
// for time to save); else none.
func savePath(g *Gang, st checkpoint.State) (SavePath, int64) {
	grace := int64(-1)
	for _, p := range g.Pods {
		if grace < 0 || p.GracePeriodSeconds < grace {
			grace = p.GracePeriodSeconds
		}
	}
	if grace < 0 {
		grace = DefaultGracePeriodSeconds
	}
	switch {
	case st.Support == checkpoint.SupportYes,
		st.Support == checkpoint.SupportUnknown && st.Response.ObservedRequestID != "" && st.Response.Status != checkpoint.StatusNone:
		return PathProtocol, grace
	case grace > DefaultGracePeriodSeconds:
		return PathSIGTERM, grace
	}
	return PathNone, grace
}

// PathWords says what a path means for the gang's work, for steps and
// tables.
func PathWords(p SavePath, grace int64) string {
	switch p {
	case PathProtocol:
		return "checkpoint-and-yield"
	case PathSIGTERM:
		return fmt.Sprintf("SIGTERM to every rank at once, %ds to save", grace)
	}
	return "none: work since the last checkpoint is lost"
}

// Plan is what `plan` reports and what `run --dry-run` would do.
type Plan struct {
	RunID string             `json:"runID,omitempty"`
	Nodes []PlanNode         `json:"nodes"`
	Gangs []PlanGang         `json:"gangs"`
	Pods  []eviction.Verdict `json:"pods"`
	Steps []string           `json:"steps"`
}

// Plan discovers gangs and blockers on nodes without changing anything.
func (d *Drainer) Plan(ctx context.Context, nodes []string) (*Plan, error) {
	recs, err := d.readNodes(ctx, nodes)
	if err != nil {
		return nil, err
	}
	runID, resumed, err := d.chooseRun(recs)
	if err != nil || !resumed {
		runID = ""
	}
	selected, _ := d.selectNodes(nodes, recs, runID)
	isSel := map[string]bool{}
	for _, n := range selected {
		isSel[n] = true
	}
	disc := &Discoverer{Kube: d.Kube, Dynamic: d.Dynamic, Kueue: d.Kueue, GPUResources: d.GPUResources}
	found, err := disc.Discover(ctx, nodes)
	if err != nil {
		return nil, err
	}
	p := &Plan{RunID: runID}
	now := d.clock().Now()
	keys := d.keys()
	for _, n := range nodes {
		r := recs[n]
		pn := PlanNode{Node: n, GPUs: r.GPUs, Unschedulable: r.Unschedulable, RunID: r.RunID, State: r.State, Selected: isSel[n]}
		for _, pod := range found.NodePods[n] {
			if podDone(&pod) || isDaemonOrMirror(&pod) {
				continue
			}
			if _, ok := found.GangOf[pod.UID]; ok {
				pn.GangPods++
			} else {
				pn.OtherPods++
			}
		}
		p.Nodes = append(p.Nodes, pn)
	}
	for _, g := range found.Gangs {
		pg := PlanGang{Gang: g}
		st := keys.StateOf(g.Labels, g.Annotations)
		pg.Support = st.Support
		if st.Response.ObservedRequestID != "" {
			pg.CheckpointStatus = st.Response.Status
		}
		pg.Path, pg.GracePeriodSeconds = savePath(g, st)
		pg.LastCheckpoint = st.LastCheckpoint
		since := pg.LastCheckpoint
		pg.LastCheckpointKnown = !since.IsZero()
		if since.IsZero() {
			since = g.StartedAt
		}
		if !since.IsZero() && now.After(since) {
			age := now.Sub(since)
			pg.LastCheckpointAgeSeconds = int64(age.Seconds())
			pg.PlainDrainLossGPUHours = round2(float64(g.GPUs) * age.Hours())
		}
		if pg.Support == checkpoint.SupportNo {
			pg.YieldLossGPUHours = pg.PlainDrainLossGPUHours
		}
		p.Gangs = append(p.Gangs, pg)
	}
	p.Pods, err = d.evaluatePods(ctx, nodes, found, now)
	if err != nil {
		return nil, err
	}
	p.Steps = d.steps(p, found, selected)
	return p, nil
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// evaluatePods predicts, with pkg/eviction, how evicting each non-gang pod
// of the chosen nodes would go, spending PDB budgets as a drain would.
func (d *Drainer) evaluatePods(ctx context.Context, nodes []string, found *Discovery, now time.Time) ([]eviction.Verdict, error) {
	var nodeObjs []*corev1.Node
	for _, n := range nodes {
		obj, err := d.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", n, err)
		}
		nodeObjs = append(nodeObjs, obj)
	}
	namespaces := map[string]bool{}
	var targets []*corev1.Pod
	for _, n := range nodes {
		for i := range found.NodePods[n] {
			pod := &found.NodePods[n][i]
			if _, gang := found.GangOf[pod.UID]; gang || podDone(pod) {
				continue
			}
			targets = append(targets, pod)
			namespaces[pod.Namespace] = true
		}
	}
	var all []*corev1.Pod
	var pdbs []*policyv1.PodDisruptionBudget
	unknown := map[string]string{}
	for _, ns := range sortedKeys(namespaces) {
		list, err := d.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing pods in namespace %s: %w", ns, err)
		}
		for i := range list.Items {
			all = append(all, &list.Items[i])
		}
		bl, err := d.Kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			unknown[ns] = err.Error()
			continue
		}
		for i := range bl.Items {
			pdbs = append(pdbs, &bl.Items[i])
		}
	}
	idx := eviction.NewIndex(nodeObjs, all, pdbs)
	for ns, why := range unknown {
		idx.SetPDBsUnknown(ns, why)
	}
	sim := eviction.Evaluator{Now: now, DeleteEmptyDirData: d.Options.DeleteEmptyDirData, Force: d.Options.Force}.NewSimulation(idx)
	sort.Slice(targets, func(i, j int) bool {
		if targets[i].Spec.NodeName != targets[j].Spec.NodeName {
			return targets[i].Spec.NodeName < targets[j].Spec.NodeName
		}
		return targets[i].Namespace+"/"+targets[i].Name < targets[j].Namespace+"/"+targets[j].Name
	})
	out := make([]eviction.Verdict, 0, len(targets))
	for _, t := range targets {
		out = append(out, sim.Evict(t))
	}
	return out, nil
}

func (d *Drainer) steps(p *Plan, found *Discovery, selected []string) []string {
	var s []string
	add := func(f string, a ...any) { s = append(s, fmt.Sprintf("%d. ", len(s)+1)+fmt.Sprintf(f, a...)) }
	var cordon []string
	for _, n := range p.Nodes {
		if n.Selected && n.State != NodeDrained {
			cordon = append(cordon, n.Node)
		}
	}
	if len(cordon) > 0 {
		add("cordon %s and record the run and whether each node was cordoned before", strings.Join(cordon, ", "))
	}
	for _, n := range p.Nodes {
		if !n.Selected {
			add("leave %s for a later run (--max-unavailable-gpus)", n.Node)
		}
	}
	keys := d.keys()
	on := d.Options.OnTimeout
	if on == "" {
		on = OnTimeoutAbort
	}
	for _, g := range p.Gangs {
		if g.Method == StopUnsupported {
			add("gang %s cannot be stopped as a unit (%s): its nodes stay cordoned and are not drained", g.Key, g.Problem)
			continue
		}
		if g.Support == checkpoint.SupportNo {
			add("gang %s does not speak checkpoint-and-yield: %s (save path: %s)", g.Key, onTimeoutWords(on), PathWords(g.Path, g.GracePeriodSeconds))
			if on == OnTimeoutAbort {
				continue
			}
		} else {
			t, _ := protocolTarget(g.Gang)
			var notes []string
			if n := len(mirrorPods(keys, g.Gang)); n > 0 {
				notes = append(notes, fmt.Sprintf("mirrored onto %d pods", n))
			}
			if d.Options.CheckpointDeadline > 0 {
				notes = append(notes, fmt.Sprintf("deadline %s", d.Options.CheckpointDeadline))
			}
			paren := ""
			if len(notes) > 0 {
				paren = " (" + strings.Join(notes, ", ") + ")"
			}
			fallback := ""
			if g.Path != PathProtocol {
				fallback = fmt.Sprintf(" (unlabelled and it never answered: if it does not now, save path %s)", PathWords(g.Path, g.GracePeriodSeconds))
			}
			add("annotate %s with %s=%s%s and wait for ready-to-stop; on timeout: %s%s", t, keys.Request, checkpoint.Requested, paren, onTimeoutWords(on), fallback)
		}
		others := g.Ranks - g.RanksOnNodes
		deletes := ""
		if d.Options.DeleteStoppedPods && jobPods(g.Kind) {
			deletes = "; as each of its Jobs is suspended, delete the pods it still runs (its tracking finalizer first, each pod with its grace period)"
		}
		switch g.Method {
		case StopKueue:
			add("stop gang %s as a unit: set Kueue Workload %s/%s spec.active=false and wait until Kueue evicts it and its %d pods (%d on other nodes) are gone%s", g.Key, g.Namespace, g.Workload.Name, g.Ranks, others, deletes)
		case StopSuspend:
			add("stop gang %s as a unit: set %s spec.suspend=true and wait for its %d pods (%d on other nodes) to go%s", g.Key, g.Kind, g.Ranks, others, deletes)
		case StopScaleToZero:
			add("stop gang %s as a unit: scale the LeaderWorkerSet to 0 (replicas recorded for restore) and wait for its %d pods", g.Key, g.Ranks)
		case StopDeletePods:
			add("stop gang %s as a unit: delete its %d pods together (%d on other nodes)", g.Key, g.Ranks, others)
		}
	}
	byNode := map[string][]eviction.Verdict{}
	for _, v := range p.Pods {
		byNode[v.Node] = append(byNode[v.Node], v)
	}
	for _, n := range selected {
		vs := byNode[n]
		count, blocked := 0, 0
		for _, v := range vs {
			switch v.Outcome {
			case eviction.OutcomeIgnored:
			case eviction.OutcomeNow:
				count++
			default:
				count++
				blocked++
			}
		}
		verb := "evict"
		if d.Options.DisableEviction {
			verb = "DELETE (--disable-eviction, PDBs bypassed)"
		}
		if count > 0 {
			msg := fmt.Sprintf("%s %d pod(s) from %s", verb, count, n)
			if blocked > 0 {
				msg += fmt.Sprintf(" (%d refused for now or for good; see the pod list)", blocked)
			}
			add("%s", msg)
		}
	}
	_ = found
	if len(cordon) > 0 {
		add("mark the nodes drained; after the upgrade run `kubectl gang-drain restore %s`", orDefault(p.RunID, "RUN"))
	}
	return s
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func onTimeoutWords(o OnTimeout) string {
	switch o {
	case OnTimeoutStop:
		return "stop it anyway (work since its last checkpoint is lost)"
	case OnTimeoutWait:
		return "keep waiting"
	default:
		return "withdraw the request and leave it running; its nodes are not drained"
	}
}

// dryRun fills a RunResult with what Run would do.
func (d *Drainer) dryRun(ctx context.Context, selected []string, res *RunResult) error {
	p, err := d.Plan(ctx, selected)
	if err != nil {
		return err
	}
	res.Steps = p.Steps
	found := map[string]bool{}
	for _, g := range p.Gangs {
		found[g.Key] = true
		o := d.outcome(g.Gang, ActionWouldStop, "")
		if g.Method == StopUnsupported || g.Support == checkpoint.SupportNo && d.Options.OnTimeout == OnTimeoutAbort {
			o.Action = ActionWouldSkip
		}
		res.Gangs = append(res.Gangs, o)
	}
	if !res.Resumed {
		return nil
	}
	unfinished, err := d.unfinishedStops(ctx, selected, found)
	if err != nil {
		return err
	}
	for _, g := range unfinished {
		res.Gangs = append(res.Gangs, d.outcome(g, ActionWouldStop, "its pods are gone; would finish the stop begun earlier in this run"))
	}
	return nil
}
