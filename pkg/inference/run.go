package inference

// The paced run: cordon the pool, surge, then drain wave by wave, each only
// when the replicas the previous one displaced are Ready elsewhere and
// every model keeps its floor, and scale the surge back at the end. Every
// step is recorded in the cluster (pkg/gang's node records, the surge
// record on each Deployment), so a re-run resumes where it stopped.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

// EventModel is the type of events about a model (surge, readiness,
// floors); the other events are pkg/gang's.
const EventModel gang.EventType = "model"

// ErrRefused is wrapped by the error of a run whose plan is refused: it
// changed nothing.
var ErrRefused = errors.New("plan refused")

// ErrUnschedulable is wrapped (with gang.ErrIncomplete) by the error of a
// run stopped because a displaced or surged replica the plan placed
// outside the pool is Unschedulable: the headroom the plan counted on is
// gone, so waiting would never end and draining on would take the model
// below what the plan promised.
var ErrUnschedulable = errors.New("replica unschedulable")

// ErrReplicaFailing is wrapped (with gang.ErrIncomplete) by the error of a
// run stopped because a displaced or surged replica outside the pool is in
// CrashLoopBackOff: it does not start where the scheduler put it (a
// smaller GPU, say), so waiting for it to load would never end.
var ErrReplicaFailing = errors.New("replica failing")

// ErrSurgeReverted is wrapped (with gang.ErrIncomplete) by the error of a
// run stopped because a surged Deployment's spec.replicas fell below what
// the run set (a GitOps sync or someone else scaled it back): the waves
// were planned at the surged count, which its budget no longer allows.
var ErrSurgeReverted = errors.New("surge reverted")

// ErrBudgetBlocked is wrapped (with gang.ErrIncomplete) by the error of a
// run stopped because a model's PodDisruptionBudget cannot allow the wave
// with every model pod it selects Ready: it also selects pods outside the
// models that are not Ready, which it counts as expected without a healthy
// pod (the disruption controller's getExpectedPodCount and
// countHealthyPods, kubernetes/kubernetes@v1.37.2
// pkg/controller/disruption/disruption.go), so waiting would never end.
var ErrBudgetBlocked = errors.New("budget blocked by pods outside the models")

// RunOptions configure a run.
type RunOptions struct {
	// Plan shapes the plan the run keeps.
	Plan Options
	// Drain configures pkg/gang's drain of each wave (RunID, Requester,
	// DryRun, PollInterval, EvictionTimeout, DeleteEmptyDirData, Force).
	Drain gang.Options
}

func (o RunOptions) poll() time.Duration {
	if o.Drain.PollInterval > 0 {
		return o.Drain.PollInterval
	}
	return time.Second
}

// WaveOutcome is what the run did in one wave.
type WaveOutcome struct {
	Index int      `json:"index"`
	Nodes []string `json:"nodes"`
	// GateStartedAt is when the run began waiting for the previous wave's
	// replicas; DrainStartedAt when the drain began; DrainedAt when the
	// nodes were empty; ReadyAt when every replacement that found a GPU
	// was Ready (known at the next wave's gate, or at the end).
	GateStartedAt  time.Time `json:"gateStartedAt,omitzero"`
	DrainStartedAt time.Time `json:"drainStartedAt,omitzero"`
	DrainedAt      time.Time `json:"drainedAt,omitzero"`
	ReadyAt        time.Time `json:"readyAt,omitzero"`
	// PlannedColdStartSeconds is the plan's cold start of the wave.
	PlannedColdStartSeconds float64 `json:"plannedColdStartSeconds"`
}

// RunResult is the outcome of Runner.Run.
type RunResult struct {
	RunID   string `json:"runID"`
	Resumed bool   `json:"resumed"`
	DryRun  bool   `json:"dryRun"`
	Plan    *Plan  `json:"plan"`
	// Surges are the Deployments surged before the first wave, ScaledBack
	// those scaled back at the end.
	Surges     []SurgeOutcome `json:"surges"`
	Waves      []WaveOutcome  `json:"waves"`
	ScaledBack []SurgeOutcome `json:"scaledBack"`
	// MinServing is the fewest Ready replicas each model had at any poll
	// of the run, beside its Floor.
	MinServing map[string]int32  `json:"minServing"`
	Floor      map[string]int32  `json:"floor"`
	Nodes      []gang.NodeRecord `json:"nodes"`
	// Steps are what a dry run would do.
	Steps      []string  `json:"steps,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Complete   bool      `json:"complete"`
}

// Runner drains an inference pool by its plan. Kube, Dynamic and Clock
// are required (Clock defaults to the real one); Kueue may be nil.
type Runner struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Kueue   kueueclient.Interface
	Clock   clock.WithTicker
	Options RunOptions
	// Weights override the weight annotations per model (namespace/name).
	Weights map[string]Weights
	// OnEvent receives one event per state change, pkg/gang's included.
	OnEvent      func(gang.Event)
	GPUResources []corev1.ResourceName

	mu         sync.Mutex
	minServing map[string]int32
}

func (r *Runner) clock() clock.WithTicker {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

func (r *Runner) emit(e gang.Event) {
	if r.OnEvent != nil {
		r.OnEvent(e)
	}
}

func (r *Runner) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.clock().After(d):
		return nil
	}
}

// Reader returns the pool reader the runner uses.
func (r *Runner) Reader() *Reader {
	return &Reader{Kube: r.Kube, GPUResources: r.GPUResources, Weights: r.Weights,
		Discoverer: &gang.Discoverer{Kube: r.Kube, Dynamic: r.Dynamic, Kueue: r.Kueue, GPUResources: r.GPUResources}}
}

// Plan reads the pool and plans its drain, touching nothing.
func (r *Runner) Plan(ctx context.Context, nodes []string) (*Pool, *Plan, error) {
	pool, err := r.Reader().Read(ctx, nodes)
	if err != nil {
		return nil, nil, err
	}
	return pool, Compute(pool, r.Options.Plan), nil
}

func (r *Runner) drainer(runID string) *gang.Drainer {
	o := r.Options.Drain
	o.RunID = runID
	return &gang.Drainer{Kube: r.Kube, Dynamic: r.Dynamic, Kueue: r.Kueue, Clock: r.clock(), Options: o, OnEvent: r.OnEvent, GPUResources: r.GPUResources}
}

// Run drains the pool's nodes by the plan. It refuses (wrapping
// ErrRefused, having changed nothing) a plan that takes a model below its
// floor; otherwise it cordons every node, surges, drains the waves and
// scales the surge back. Errors that leave a state a re-run resumes wrap
// gang.ErrIncomplete.
func (r *Runner) Run(ctx context.Context, nodes []string) (*RunResult, error) {
	res := &RunResult{DryRun: r.Options.Drain.DryRun, StartedAt: r.clock().Now(), MinServing: map[string]int32{}, Floor: map[string]int32{}}
	_, plan, err := r.Plan(ctx, nodes)
	if err != nil {
		return nil, err
	}
	res.Plan = plan
	for _, mp := range plan.Models {
		res.Floor[mp.Key] = mp.Floor
	}
	if plan.Refused() {
		return res, fmt.Errorf("%w: %s", ErrRefused, strings.Join(plan.Refusals, "; "))
	}
	d := r.drainer(r.Options.Drain.RunID)
	runID, resumed, err := d.Cordon(ctx, nodes)
	res.RunID, res.Resumed = runID, resumed
	if err != nil {
		return res, err
	}
	defer func() { res.Nodes = r.nodeRecords(context.WithoutCancel(ctx), nodes); res.FinishedAt = r.clock().Now() }()
	if r.Options.Drain.DryRun {
		res.Steps = Steps(plan, runID, len(nodes))
		return res, nil
	}
	// The ETA before the first wave, as the plan printed it (of the nodes
	// left, on a resumed run).
	eta := plan.ETALine()
	if resumed {
		eta = "resumed, the nodes left: " + eta
	}
	r.emit(gang.Event{Type: EventModel, Message: eta})
	for _, n := range nodes {
		var held []string
		for _, mp := range plan.Models {
			if mp.OnPool[n] > 0 {
				held = append(held, mp.Key)
			}
		}
		if err := r.markNode(ctx, n, runID, held); err != nil {
			return res, incomplete(err)
		}
	}

	// The serving capacity is read every poll for the whole run.
	r.minServing = map[string]int32{}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.sample(sampleCtx, plan) }()
	defer func() {
		stopSampling()
		wg.Wait()
		r.mu.Lock()
		for k, v := range r.minServing {
			res.MinServing[k] = v
		}
		r.mu.Unlock()
	}()

	// 1. Surge.
	for _, mp := range plan.Models {
		if mp.Surged > 0 && mp.SurgedBy == runID {
			res.Surges = append(res.Surges, SurgeOutcome{Deployment: mp.Key, Run: runID, Surge: mp.Surged, ReplicasBefore: mp.Replicas, ReplicasSet: mp.Desired,
				ReplicasNow: mp.Desired, ReplicasAfter: mp.Desired, Action: ActionSurged, Message: "surged earlier by this run"})
		}
		add := mp.Surge - mp.Surged
		if add <= 0 {
			continue
		}
		dep, err := r.Kube.AppsV1().Deployments(mp.Namespace).Get(ctx, mp.Name, metav1.GetOptions{})
		if err != nil {
			return res, incomplete(fmt.Errorf("reading deployment %s: %w", mp.Key, err))
		}
		o, err := ApplySurge(ctx, r.Kube, dep, runID, add, r.clock().Now())
		if err != nil {
			return res, incomplete(err)
		}
		res.Surges = append(res.Surges, o)
		r.emit(gang.Event{Type: EventModel, Message: fmt.Sprintf("model %s: surged from %d to %s before the drain (+%d)", mp.Key, o.ReplicasNow, cli.Plural(int(o.ReplicasAfter), "replica"), add)})
	}

	// 2. The waves, each once the previous one's replicas are Ready.
	// Unplaced counts, per model, the replicas the plan leaves without a
	// GPU (Pending before the run, and those of the waves drained so far
	// that find no free GPU outside the pool, recorded on their nodes for
	// a resume): only those may stay Unschedulable.
	unplaced, err := r.unplacedAtStart(ctx, plan, nodes, runID, resumed)
	if err != nil {
		return res, incomplete(err)
	}
	for i := range plan.Waves {
		w := &plan.Waves[i]
		wo := WaveOutcome{Index: w.Index, Nodes: w.Nodes, PlannedColdStartSeconds: w.ColdStartSeconds, GateStartedAt: r.clock().Now()}
		if err := r.gate(ctx, plan, w, unplaced); err != nil {
			res.Waves = append(res.Waves, wo)
			return res, incomplete(err)
		}
		if n := len(res.Waves); n > 0 {
			res.Waves[n-1].ReadyAt = r.clock().Now()
		}
		if err := r.recordUnplaced(ctx, runID, w); err != nil {
			res.Waves = append(res.Waves, wo)
			return res, incomplete(err)
		}
		wo.DrainStartedAt = r.clock().Now()
		r.emit(gang.Event{Type: EventModel, Message: fmt.Sprintf("wave %d of %d: draining %s (planned cold start %s)", w.Index, len(plan.Waves), strings.Join(w.Nodes, ", "), w.ColdStart.Round(time.Millisecond))})
		dr, err := r.drainer(runID).Run(ctx, w.Nodes)
		wo.DrainedAt = r.clock().Now()
		res.Waves = append(res.Waves, wo)
		if err != nil {
			return res, incomplete(err)
		}
		if !dr.Complete {
			return res, incomplete(fmt.Errorf("wave %d: not every node drained", w.Index))
		}
		for k, n := range w.Unplaced {
			unplaced[k] += n
		}
	}

	// 3. The last wave's replicas Ready, then the surge scaled back.
	if err := r.gate(ctx, plan, nil, unplaced); err != nil {
		return res, incomplete(err)
	}
	if n := len(res.Waves); n > 0 {
		res.Waves[n-1].ReadyAt = r.clock().Now()
	}
	back, err := UndoRuns(ctx, r.Kube, []string{runID}, false, r.clock().Now())
	res.ScaledBack = back
	for _, o := range back {
		r.emit(gang.Event{Type: EventModel, Message: fmt.Sprintf("model %s: surge scaled back from %d to %s", o.Deployment, o.ReplicasNow, cli.Plural(int(o.ReplicasAfter), "replica"))})
	}
	if err != nil {
		return res, incomplete(err)
	}
	res.Complete = true
	return res, nil
}

func incomplete(err error) error {
	if err == nil || errors.Is(err, gang.ErrIncomplete) {
		return err
	}
	return fmt.Errorf("%w: %w", gang.ErrIncomplete, err)
}

// markNode records on a node that the run is an inference run, and adds
// the models with replicas on it to those it records there (a resumed run
// keeps what the first one saw on a node it drained in part).
func (r *Runner) markNode(ctx context.Context, node, runID string, models []string) error {
	n, err := r.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", node, err)
	}
	recorded := ""
	if n.Annotations[AnnInferenceRun] == runID {
		recorded = n.Annotations[AnnInferenceModels]
	}
	merged := mergeModels(recorded, models)
	if n.Annotations[AnnInferenceRun] == runID && n.Annotations[AnnInferenceModels] == merged {
		return nil
	}
	ann := map[string]any{AnnInferenceRun: runID, AnnInferenceModels: merged}
	if merged == "" {
		ann[AnnInferenceModels] = nil
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if _, err := r.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("updating node %s: %w", node, err)
	}
	return nil
}

func (r *Runner) nodeRecords(ctx context.Context, nodes []string) []gang.NodeRecord {
	var out []gang.NodeRecord
	for _, n := range nodes {
		node, err := r.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			continue
		}
		out = append(out, gang.ReadNodeRecord(node, r.GPUResources))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// modelState is one read of a model's pods.
type modelState struct {
	desired  int32
	observed bool
	// surge is the run's surge record on the Deployment, if any.
	surge     SurgeRecord
	surged    bool
	pods      int32 // not terminating
	ready     int32
	hydrating []string
	// pending are pods no node has taken yet and the scheduler has not
	// found unschedulable; unschedulable those it has, with its message.
	pending       []string
	unschedulable []string
	// troubled are pods outside the pool not Ready that restarted or
	// wait with a reason (not loading weights), crashLooping those of
	// them in CrashLoopBackOff; each with the pod, node and reason.
	troubled     []string
	crashLooping []string
	onNodes      map[string]int32 // Ready pods per node
}

func (r *Runner) readModel(ctx context.Context, mp *ModelPlan, pool map[string]bool) (modelState, error) {
	st := modelState{onNodes: map[string]int32{}}
	dep, err := r.Kube.AppsV1().Deployments(mp.Namespace).Get(ctx, mp.Name, metav1.GetOptions{})
	if err != nil {
		return st, fmt.Errorf("reading deployment %s: %w", mp.Key, err)
	}
	st.desired = replicasOf(dep)
	st.surge, st.surged = ReadSurgeRecord(dep)
	st.observed = dep.Status.ObservedGeneration >= dep.Generation
	pods, err := r.Kube.CoreV1().Pods(mp.Namespace).List(ctx, metav1.ListOptions{LabelSelector: mp.Selector})
	if err != nil {
		return st, fmt.Errorf("listing the pods of %s: %w", mp.Key, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if podFinished(p) || p.DeletionTimestamp != nil {
			continue
		}
		st.pods++
		switch {
		case podReady(p):
			st.ready++
			st.onNodes[p.Spec.NodeName]++
		case p.Spec.NodeName == "":
			if msg, ok := unschedulable(p); ok {
				st.unschedulable = append(st.unschedulable, p.Name+": "+msg)
			} else {
				st.pending = append(st.pending, p.Name)
			}
		case !pool[p.Spec.NodeName]:
			what := p.Name + " on " + p.Spec.NodeName
			switch why, crash := replicaTrouble(p); {
			case crash:
				st.crashLooping = append(st.crashLooping, what+": "+why)
			case why != "":
				st.troubled = append(st.troubled, what+": "+why)
			default:
				st.hydrating = append(st.hydrating, what)
			}
		}
	}
	sort.Strings(st.hydrating)
	sort.Strings(st.troubled)
	sort.Strings(st.crashLooping)
	sort.Strings(st.pending)
	sort.Strings(st.unschedulable)
	return st, nil
}

// unschedulable reports whether the scheduler found no node for a pod:
// its PodScheduled condition False with reason Unschedulable
// (k8s.io/api@v0.37.2 core/v1 types.go, PodReasonUnschedulable: "the
// scheduler can't schedule the pod right now, for example due to
// insufficient resources in the cluster"), and the scheduler's message.
func unschedulable(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			msg := c.Message
			if msg == "" {
				msg = c.Reason
			}
			return msg, true
		}
	}
	return "", false
}

// gitOpsWord names the GitOps tool a model is applied by, for an error.
func gitOpsWord(mp *ModelPlan) string {
	if mp.GitOps == "" {
		return ""
	}
	return ", likely by " + mp.GitOps
}

// replicaTrouble says why a replica that is not Ready is not simply
// loading its weights: its containers restarted (with the last exit), or
// one waits with a reason other than being created; crash is true when
// one is in CrashLoopBackOff, the kubelet's back-off after repeated exits
// (kubernetes/kubernetes@v1.37.2 pkg/kubelet/container/sync_result.go,
// ErrCrashLoopBackOff, set as the waiting reason). Init containers are
// read too, each by name: KServe downloads a model's weights in its
// storage-initializer init container (kserve/kserve pkg/constants/constants.go
// at a89179c6b80b536cd24e692e1b714e7106e5cca9,
// StorageInitializerContainerName), so one that fails is no replica
// loading its weights.
func replicaTrouble(p *corev1.Pod) (why string, crash bool) {
	var parts []string
	for _, cs := range p.Status.InitContainerStatuses {
		if w, c := containerTrouble([]corev1.ContainerStatus{cs}); w != "" {
			parts = append(parts, "init container "+cs.Name+" "+w)
			crash = crash || c
		}
	}
	w, c := containerTrouble(p.Status.ContainerStatuses)
	if w != "" {
		parts = append([]string{w}, parts...)
	}
	return strings.Join(parts, " and "), crash || c
}

// containerTrouble is replicaTrouble over one list of container statuses.
func containerTrouble(statuses []corev1.ContainerStatus) (why string, crash bool) {
	var restarts int32
	var waiting, last string
	for _, cs := range statuses {
		restarts += cs.RestartCount
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			waiting = w.Reason
			crash = crash || w.Reason == "CrashLoopBackOff"
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			last = fmt.Sprintf("last exit %d", t.ExitCode)
			if t.Reason != "" {
				last += " (" + t.Reason + ")"
			}
		}
	}
	var parts []string
	if waiting != "" {
		parts = append(parts, waiting)
	}
	if restarts > 0 {
		parts = append(parts, cli.Plural(int(restarts), "restart"))
		if last != "" {
			parts = append(parts, last)
		}
	}
	return strings.Join(parts, ", "), crash
}

// gate waits until every model has all its pods (the ReplicaSet caught up
// with the evictions), none is waiting for the scheduler, none scheduled
// outside the pool is still loading its weights, and, for the wave about
// to drain, every model keeps its floor once the wave's Ready replicas go
// and its PodDisruptionBudget allows as many disruptions. A model with
// more Unschedulable replicas than the plan leaves without a GPU
// (unplaced) stops the run (ErrUnschedulable): the headroom is gone.
func (r *Runner) gate(ctx context.Context, plan *Plan, w *Wave, unplaced map[string]int32) error {
	inWave := map[string]bool{}
	if w != nil {
		for _, n := range w.Nodes {
			inWave[n] = true
		}
	}
	pool := map[string]bool{}
	for _, mp := range plan.Models {
		for n := range mp.OnPool {
			pool[n] = true
		}
	}
	for _, n := range plan.Drained {
		pool[n] = true
	}
	for _, w := range plan.Waves {
		for _, n := range w.Nodes {
			pool[n] = true
		}
	}
	last := ""
	for {
		var waiting []string
		// The disruptions of a budget that selects several models are
		// shared: what one model's replicas take, the next cannot.
		taken := map[string]int32{}
		for i := range plan.Models {
			mp := &plan.Models[i]
			st, err := r.readModel(ctx, mp, pool)
			if err != nil {
				return err
			}
			r.note(mp.Key, st.ready)
			switch {
			case st.surged && st.desired < st.surge.ReplicasSet:
				return fmt.Errorf("%w: model %s: spec.replicas is %d, below what this run set when it surged it (%d, run %s)%s: the waves were planned at the surged count, which the budget no longer allows; stop what scaled it down and put spec.replicas back to %d, then run the same command again to resume (the pool's nodes stay cordoned)",
					ErrSurgeReverted, mp.Key, st.desired, st.surge.ReplicasSet, st.surge.Run, gitOpsWord(mp), st.surge.ReplicasSet)
			case !st.observed:
				waiting = append(waiting, fmt.Sprintf("model %s: the Deployment controller has not yet acted on its change", mp.Key))
				continue
			case int32(len(st.unschedulable)) > unplaced[mp.Key]:
				return fmt.Errorf("%w: model %s: %s Unschedulable (%s), %d planned without a GPU: the free GPUs of %s outside the pool the plan counted on are gone; free them (or lower the surge), then run the same command again to resume",
					ErrUnschedulable, mp.Key, cli.Plural(len(st.unschedulable), "replica"), strings.Join(st.unschedulable, "; "), unplaced[mp.Key], productWord(mp.Product))
			case len(st.crashLooping) > 0:
				return fmt.Errorf("%w: model %s: %s outside the pool in CrashLoopBackOff (%s): they do not start where the scheduler put them (a smaller GPU, a node they cannot run on, or weights they cannot fetch); fix the replica or its node (the pool's nodes stay cordoned), then run the same command again to resume",
					ErrReplicaFailing, mp.Key, cli.Plural(len(st.crashLooping), "replica"), strings.Join(st.crashLooping, "; "))
			case st.pods < st.desired:
				waiting = append(waiting, fmt.Sprintf("model %s: %d of %d replicas created", mp.Key, st.pods, st.desired))
				continue
			case len(st.pending) > 0:
				waiting = append(waiting, fmt.Sprintf("model %s: %s not yet scheduled (%s)", mp.Key, cli.Plural(len(st.pending), "replica"), strings.Join(st.pending, ", ")))
				continue
			case len(st.troubled) > 0:
				waiting = append(waiting, fmt.Sprintf("model %s: %s not Ready and not loading weights (%s)", mp.Key, cli.Plural(len(st.troubled), "replica"), strings.Join(st.troubled, "; ")))
				continue
			case len(st.hydrating) > 0:
				waiting = append(waiting, fmt.Sprintf("model %s: %s loading weights (%s)", mp.Key, cli.Plural(len(st.hydrating), "replica"), strings.Join(st.hydrating, ", ")))
				continue
			}
			var leaving int32
			for n := range inWave {
				leaving += st.onNodes[n]
			}
			if leaving == 0 {
				continue
			}
			// What the wave takes at once: all its Ready replicas, or as
			// many as the budget allows (the rest go as replacements
			// become Ready); the plan counted on at least w.AtOnce.
			atOnce := leaving
			if mp.pdb != nil {
				pdb, err := r.readPDB(ctx, mp.Namespace, mp.pdb.Name)
				if err != nil {
					return err
				}
				// A budget is its namespace and name: two teams may
				// each have one called llama.
				b := mp.Namespace + "/" + pdb.Name
				// Never wait for more than the budget can allow at its live
				// expected count (its replicas once a surge is gone), all
				// of them healthy.
				ceiling := max(pdb.Status.ExpectedPods-pdb.Status.DesiredHealthy-taken[b], 1)
				want := min(leaving, w.AtOnce[mp.Key], ceiling)
				left := pdb.Status.DisruptionsAllowed - taken[b]
				if pdb.Status.ObservedGeneration >= pdb.Generation && left < want {
					if unhealthy, healthy, err := r.blockedOutside(ctx, plan, pdb); err != nil {
						return err
					} else if len(unhealthy) > 0 && healthy-pdb.Status.DesiredHealthy-taken[b] < want {
						return fmt.Errorf("%w: model %s: PodDisruptionBudget %s needs %d healthy of the pods it selects and has %d with every model replica Ready, so it cannot allow the %d the wave takes: it also selects %s outside the models that %s not Ready (%s); make them Ready or take them out of its selector, then run the same command again to resume (the pool's nodes stay cordoned)",
							ErrBudgetBlocked, mp.Key, b, pdb.Status.DesiredHealthy, healthy-taken[b], want, cli.Plural(len(unhealthy), "pod"), cli.Agree(len(unhealthy), "is", "are"), strings.Join(unhealthy, ", "))
					}
				}
				if pdb.Status.ObservedGeneration < pdb.Generation || left < want {
					waiting = append(waiting, fmt.Sprintf("model %s: PodDisruptionBudget %s allows %s, the wave takes %d at once", mp.Key, pdb.Name, cli.Plural(int(left), "disruption"), want))
					continue
				}
				atOnce = min(leaving, left)
				taken[b] += atOnce
			}
			// A serving model keeps one Ready whatever its budget allows:
			// the live budget may count pods the plan did not (other
			// models now Ready, pods outside the models) and let every
			// replica of this one go.
			keep, word := mp.keep(), mp.keepWord()
			if keep < 1 {
				keep, word = 1, "at least 1 kept whatever its PodDisruptionBudget allows"
			}
			if st.ready-atOnce < keep {
				why := fmt.Sprintf("model %s: %d Ready, the wave takes %d at once, %s", mp.Key, st.ready, atOnce, word)
				if n := len(st.unschedulable); n > 0 {
					why += fmt.Sprintf("; %s Unschedulable: no free GPU for them", cli.Plural(n, "replica"))
				}
				waiting = append(waiting, why)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if msg := strings.Join(waiting, "; "); msg != last {
			r.emit(gang.Event{Type: EventModel, Message: "waiting: " + msg})
			last = msg
		}
		if err := r.sleep(ctx, r.Options.poll()); err != nil {
			return fmt.Errorf("waiting for the models before %s: %s: %w", waveWord(w), last, err)
		}
	}
}

// blockedOutside lists the pods a budget selects: the names of those
// outside the models that are not Ready, and how many are Ready. It
// returns no names while a model's pod the budget selects is not Ready
// (the gate waits for it first).
func (r *Runner) blockedOutside(ctx context.Context, plan *Plan, pdb *policyv1.PodDisruptionBudget) (unhealthy []string, healthy int32, err error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil, 0, nil
	}
	var models []labels.Selector
	for _, mp := range plan.Models {
		if mp.Namespace != pdb.Namespace {
			continue
		}
		if s, err := labels.Parse(mp.Selector); err == nil && !s.Empty() {
			models = append(models, s)
		}
	}
	pods, err := r.Kube.CoreV1().Pods(pdb.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, 0, fmt.Errorf("listing the pods PodDisruptionBudget %s/%s selects: %w", pdb.Namespace, pdb.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if podFinished(p) || !sel.Matches(labels.Set(p.Labels)) { // fakes ignore label selectors
			continue
		}
		if podReady(p) {
			healthy++
			continue
		}
		if slices.ContainsFunc(models, func(s labels.Selector) bool { return s.Matches(labels.Set(p.Labels)) }) {
			return nil, healthy, nil
		}
		if p.DeletionTimestamp == nil {
			unhealthy = append(unhealthy, p.Name)
		}
	}
	sort.Strings(unhealthy)
	return unhealthy, healthy, nil
}

// readPDB reads one PodDisruptionBudget with the list the plan already
// needs (a field selector on its name), so that no get is asked for.
func (r *Runner) readPDB(ctx context.Context, ns, name string) (*policyv1.PodDisruptionBudget, error) {
	list, err := r.Kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, fmt.Errorf("reading PodDisruptionBudget %s/%s: %w", ns, name, err)
	}
	for i := range list.Items {
		if list.Items[i].Name == name { // fakes ignore field selectors
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("PodDisruptionBudget %s/%s is gone", ns, name)
}

func waveWord(w *Wave) string {
	if w == nil {
		return "scaling the surge back"
	}
	return fmt.Sprintf("wave %d", w.Index)
}

// note records a model's Ready count if it is the lowest seen.
func (r *Runner) note(key string, ready int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.minServing[key]; !ok || ready < v {
		r.minServing[key] = ready
	}
}

// sample reads every model's Ready replicas each poll until ctx ends.
func (r *Runner) sample(ctx context.Context, plan *Plan) {
	for {
		for i := range plan.Models {
			mp := &plan.Models[i]
			pods, err := r.Kube.CoreV1().Pods(mp.Namespace).List(ctx, metav1.ListOptions{LabelSelector: mp.Selector})
			if err != nil {
				continue
			}
			var ready int32
			for j := range pods.Items {
				if podReady(&pods.Items[j]) {
					ready++
				}
			}
			r.note(mp.Key, ready)
		}
		if r.sleep(ctx, r.Options.poll()) != nil {
			return
		}
	}
}

// Steps describes what a run of plan would do, for a dry run.
func Steps(plan *Plan, runID string, nodes int) []string {
	out := []string{plan.ETALine(), fmt.Sprintf("cordon the %s of the pool, recording run %s on each", cli.Plural(nodes, "node"), runID)}
	if plan.Surge != nil {
		for _, mp := range plan.Models {
			if add := plan.Surge.Added[mp.Key]; add > 0 {
				out = append(out, fmt.Sprintf("surge: scale deployment %s from %d to %s (+%d), recorded on it", mp.Key, mp.Desired, cli.Plural(int(mp.Desired+add), "replica"), add))
			}
		}
		out = append(out, fmt.Sprintf("wait until the surge is Ready (planned cold start %s)", plan.Surge.ColdStart.Round(time.Millisecond)))
	}
	for _, w := range plan.Waves {
		var evict []string
		for _, k := range sortedKeys(w.Displaced) {
			if n := w.Displaced[k]; n > 0 {
				evict = append(evict, fmt.Sprintf("%d of %s", n, k))
			}
		}
		if len(evict) == 0 {
			evict = []string{"no model replica"}
		}
		out = append(out, fmt.Sprintf("wave %d: once every displaced replica is Ready elsewhere and each model keeps its floor, drain %s (evicts %s; planned cold start %s)",
			w.Index, strings.Join(w.Nodes, ", "), strings.Join(evict, ", "), w.ColdStart.Round(time.Millisecond)))
	}
	for _, mp := range plan.Models {
		if mp.Surge > 0 {
			out = append(out, fmt.Sprintf("scale deployment %s back by its surge of %d once the last wave is Ready", mp.Key, mp.Surge))
		}
	}
	out = append(out, fmt.Sprintf("after the upgrade: kubectl gang-drain restore %s", runID))
	return out
}
