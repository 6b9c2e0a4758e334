package gang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// EventType classifies progress events.
type EventType string

// Event types.
const (
	EventNode    EventType = "node"
	EventGang    EventType = "gang"
	EventPod     EventType = "pod"
	EventWarning EventType = "warning"
)

// Event is one state change, reported through Drainer.OnEvent.
type Event struct {
	Type    EventType
	Node    string
	Gang    string
	State   NodeState
	Message string
}

// ErrConflict is wrapped by errors about nodes that belong to other,
// unfinished runs.
var ErrConflict = errors.New("conflicting runs")

// ErrIncomplete is wrapped by errors of runs that stopped before the end
// but left a state a re-run resumes.
var ErrIncomplete = errors.New("drain incomplete")

// GangOutcome is what a run did with one gang.
type GangOutcome struct {
	Key       string             `json:"key"`
	Kind      Kind               `json:"kind"`
	Namespace string             `json:"namespace"`
	Name      string             `json:"name"`
	Method    StopMethod         `json:"stopMethod"`
	Support   checkpoint.Support `json:"protocol"`
	RequestID string             `json:"requestID,omitempty"`
	Verdict   checkpoint.Verdict `json:"checkpoint"`
	// Action is stopped, aborted, failed or (dry run) would-stop.
	Action  string `json:"action"`
	Message string `json:"message,omitempty"`
	GPUs    int64  `json:"gpus"`
	Ranks   int    `json:"ranks"`
	// StopStartedAt is when the stop was issued (after ready-to-stop).
	StopStartedAt time.Time `json:"stopStartedAt,omitzero"`
	// PodsGoneAt is when the last pod of the gang was gone.
	PodsGoneAt time.Time `json:"podsGoneAt,omitzero"`

	// cause is the error behind a failed action, kept so that callers can
	// tell a refused request (exit 3) from the rest.
	cause error
}

// Gang outcome actions.
const (
	ActionStopped   = "stopped"
	ActionAborted   = "aborted"
	ActionFailed    = "failed"
	ActionWouldStop = "would-stop"
	ActionWouldSkip = "would-abort"
)

// RunResult is the outcome of Drainer.Run.
type RunResult struct {
	RunID   string        `json:"runID"`
	Resumed bool          `json:"resumed"`
	DryRun  bool          `json:"dryRun"`
	Nodes   []NodeRecord  `json:"nodes"`
	Pending []string      `json:"pending,omitempty"`
	Gangs   []GangOutcome `json:"gangs"`
	Steps   []string      `json:"steps,omitempty"`
	// Complete is true when every chosen node is drained.
	Complete bool `json:"complete"`
}

// Drainer drains nodes gang by gang. Build it with its clients; all fields
// but Kueue and OnEvent are required.
type Drainer struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Kueue   kueueclient.Interface
	Clock   clock.WithTicker
	Options Options
	// OnEvent receives one event per state change.
	OnEvent func(Event)
	// GPUResources are counted as GPUs (default DefaultGPUResources).
	GPUResources []corev1.ResourceName

	mu      sync.Mutex
	nodeMu  sync.Map // node name -> *sync.Mutex: one read-merge-write of a node's gang record at a time
	records map[string]*NodeRecord
	runID   string
}

func (d *Drainer) clock() clock.WithTicker {
	if d.Clock == nil {
		return clock.RealClock{}
	}
	return d.Clock
}

func (d *Drainer) emit(e Event) {
	if d.OnEvent != nil {
		d.OnEvent(e)
	}
}

func (d *Drainer) keys() checkpoint.Keys {
	if d.Options.Keys.Prefix == "" {
		return checkpoint.DefaultKeys()
	}
	return d.Options.Keys
}

func (d *Drainer) sleep(ctx context.Context, dur time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-d.clock().After(dur):
		return nil
	}
}

// readNodes reads the node records.
func (d *Drainer) readNodes(ctx context.Context, names []string) (map[string]*NodeRecord, error) {
	out := map[string]*NodeRecord{}
	for _, n := range names {
		var node *corev1.Node
		err := d.retry(ctx, func() (err error) {
			node, err = d.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", n, err)
		}
		r := ReadNodeRecord(node, d.GPUResources)
		out[n] = &r
	}
	return out, nil
}

// chooseRun picks the run to resume or a new id.
func (d *Drainer) chooseRun(recs map[string]*NodeRecord) (string, bool, error) {
	active := map[string][]string{}
	for _, r := range recs {
		if r.RunID != "" && r.State.Active() {
			active[r.RunID] = append(active[r.RunID], r.Node)
		}
	}
	if id := d.Options.RunID; id != "" {
		for other, nodes := range active {
			if other != id {
				sort.Strings(nodes)
				return "", false, fmt.Errorf("%w: nodes %s belong to run %s, not %s; finish it with `restore %s` first", ErrConflict, strings.Join(nodes, ", "), other, id, other)
			}
		}
		return id, len(active[id]) > 0, nil
	}
	switch len(active) {
	case 0:
		return NewRunID(d.clock().Now()), false, nil
	case 1:
		for id := range active {
			return id, true, nil
		}
	}
	ids := sortedKeys(active)
	return "", false, fmt.Errorf("%w: the nodes belong to %d unfinished runs (%s); pass --run-id or restore one first", ErrConflict, len(ids), strings.Join(ids, ", "))
}

func (d *Drainer) setNode(ctx context.Context, node string, state NodeState, msg string, extra map[string]any) error {
	d.mu.Lock()
	r := d.records[node]
	same := r != nil && r.State == state && r.Message == msg && extra == nil
	d.mu.Unlock()
	if same {
		return nil
	}
	now := d.clock().Now()
	ann := map[string]any{AnnState: string(state), AnnUpdatedAt: timeString(now), AnnMessage: nilIfEmpty(msg)}
	for k, v := range extra {
		ann[k] = v
	}
	if err := d.patchNode(ctx, node, ann, nil); err != nil {
		return err
	}
	d.mu.Lock()
	if r != nil {
		changed := r.State != state
		r.State, r.Message, r.UpdatedAt = state, msg, now
		d.mu.Unlock()
		if changed {
			m := string(state)
			if msg != "" {
				m += ": " + msg
			}
			d.emit(Event{Type: EventNode, Node: node, State: state, Message: m})
		}
		return nil
	}
	d.mu.Unlock()
	return nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// advance moves a node forward to state unless it is already there or past
// it (failed stays failed).
func (d *Drainer) advance(ctx context.Context, node string, state NodeState) error {
	d.mu.Lock()
	r := d.records[node]
	cur := NodePending
	if r != nil {
		cur = r.State
	}
	d.mu.Unlock()
	if cur == NodeFailed || stateOrder[cur] >= stateOrder[state] {
		return nil
	}
	return d.setNode(ctx, node, state, "", nil)
}

// Run drains nodes: cordon, checkpoint-and-yield, stop each gang as a unit,
// evict the remaining pods. It resumes a run recorded on the nodes.
// Transient API errors (connection refused or reset, 429, 5xx) are retried
// with backoff until ctx ends, each reported as a warning event. On
// failure it returns what it did so far and an error; errors that leave a
// resumable state wrap ErrIncomplete.
func (d *Drainer) Run(ctx context.Context, nodes []string) (*RunResult, error) {
	recs, err := d.readNodes(ctx, nodes)
	if err != nil {
		return nil, err
	}
	runID, resumed, err := d.chooseRun(recs)
	if err != nil {
		return nil, err
	}
	d.records, d.runID = recs, runID
	res := &RunResult{RunID: runID, Resumed: resumed, DryRun: d.Options.DryRun}

	selected, pending := d.selectNodes(nodes, recs, runID)
	res.Pending = pending
	defer func() { res.Nodes = d.snapshot(nodes) }()

	if d.Options.DryRun {
		return res, d.dryRun(ctx, selected, res)
	}

	// 1. Cordon, recording whether each node was cordoned before.
	for _, n := range selected {
		if err := d.cordon(ctx, n); err != nil {
			return res, incomplete(err)
		}
	}
	work := []string{}
	for _, n := range selected {
		if recs[n].State != NodeDrained {
			work = append(work, n)
		}
	}
	if len(work) == 0 {
		res.Complete = len(pending) == 0
		return res, nil
	}

	// 2. Find the gangs.
	disc := &Discoverer{Kube: d.Kube, Dynamic: d.Dynamic, Kueue: d.Kueue, GPUResources: d.GPUResources}
	var found *Discovery
	err = d.retry(ctx, func() (err error) {
		found, err = disc.Discover(ctx, work)
		return err
	})
	if err != nil {
		return res, incomplete(err)
	}
	nodeGangs := map[string][]*Gang{}
	for _, g := range found.Gangs {
		for _, p := range g.Pods {
			if p.OnChosenNode && !containsGang(nodeGangs[p.Node], g) {
				nodeGangs[p.Node] = append(nodeGangs[p.Node], g)
			}
		}
	}
	// A gang whose stop this run issued may have no pods left to find:
	// the run was interrupted after the stop took effect. Its nodes
	// remember it; finish its stop from there.
	unfinished, err := d.unfinishedStops(ctx, work, gangKeys(found.Gangs))
	if err != nil {
		return res, incomplete(err)
	}
	for _, g := range unfinished {
		for _, n := range g.Nodes {
			nodeGangs[n] = append(nodeGangs[n], g)
		}
	}
	for _, n := range work {
		if len(nodeGangs[n]) > 0 {
			if err := d.advance(ctx, n, NodeCheckpointing); err != nil {
				return res, incomplete(err)
			}
		}
	}

	// 3. Checkpoint and stop each gang as a unit.
	outcomes := d.stopGangs(ctx, append(unfinished, found.Gangs...))
	res.Gangs = outcomes
	failedGang := map[string]GangOutcome{}
	// firstErr is the first error of a node's drain; cause the first error
	// behind a gang that kept its nodes from draining.
	var firstErr, cause error
	for _, o := range outcomes {
		if o.Action != ActionStopped {
			failedGang[o.Key] = o
		}
	}
	if ctx.Err() != nil {
		return res, incomplete(ctx.Err())
	}

	// 4. Drain what is left, node by node.
	for _, n := range work {
		var blocking []string
		for _, g := range nodeGangs[n] {
			if o, bad := failedGang[g.Key]; bad {
				blocking = append(blocking, fmt.Sprintf("gang %s %s (%s)", g.Key, o.Action, o.Message))
				if cause == nil && o.cause != nil {
					cause = o.cause
				}
			}
		}
		if len(blocking) > 0 {
			if err := d.setNode(ctx, n, NodeFailed, strings.Join(blocking, "; "), nil); err != nil && firstErr == nil {
				firstErr = err
			}
			continue
		}
		if err := d.drainNode(ctx, n, found); err != nil {
			if ctx.Err() != nil {
				return res, incomplete(ctx.Err())
			}
			_ = d.setNode(ctx, n, NodeFailed, err.Error(), nil)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	res.Complete = len(pending) == 0
	for _, n := range selected {
		if d.records[n].State != NodeDrained {
			res.Complete = false
		}
	}
	if firstErr != nil {
		return res, incomplete(firstErr)
	}
	if !res.Complete {
		return res, incomplete(&causedError{msg: incompleteWhy(d.snapshot(nodes), pending), cause: cause})
	}
	return res, nil
}

func gangKeys(gs []*Gang) map[string]bool {
	out := make(map[string]bool, len(gs))
	for _, g := range gs {
		out[g.Key] = true
	}
	return out
}

// unfinishedStops returns the gangs recorded on the nodes (drained ones
// aside) that are not among found but whose stop object says this run is
// still stopping them, each with the nodes that record it. handleGang
// takes them straight to stop, which re-issues the (idempotent) stop,
// waits for the pods to be gone, marks the gang stopped and clears its
// checkpoint request.
func (d *Drainer) unfinishedStops(ctx context.Context, nodes []string, found map[string]bool) ([]*Gang, error) {
	var keys []string
	recorded := map[string]GangRecord{}
	nodesOf := map[string][]string{}
	for _, n := range nodes {
		if d.records[n].State == NodeDrained {
			continue
		}
		for _, r := range d.records[n].Gangs {
			if found[r.Key] {
				continue
			}
			if _, ok := recorded[r.Key]; !ok {
				keys = append(keys, r.Key)
				recorded[r.Key] = r
			}
			nodesOf[r.Key] = append(nodesOf[r.Key], n)
		}
	}
	var out []*Gang
	for _, k := range keys {
		r := recorded[k]
		// A bare pod group has no stop object: its pods were deleted,
		// nothing else is left to finish.
		u, _, err := d.stopObject(ctx, r)
		if err != nil {
			return nil, err
		}
		if u == nil || u.GetAnnotations()[AnnStoppedByRun] != d.runID || u.GetAnnotations()[AnnStopState] != GangStopping {
			continue
		}
		out = append(out, &Gang{Key: r.Key, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Root: r.Root, Workload: r.Workload,
			Method: r.Method, GPUs: r.GPUs, Ranks: r.Ranks, Nodes: nodesOf[k], Labels: u.GetLabels(), Annotations: u.GetAnnotations()})
	}
	return out, nil
}

// causedError reads as msg and unwraps to the error behind it, so that
// errors.As finds, say, the API server's refusal.
type causedError struct {
	msg   string
	cause error
}

func (e *causedError) Error() string { return e.msg }
func (e *causedError) Unwrap() error { return e.cause }

func incompleteWhy(recs []NodeRecord, pending []string) string {
	var parts []string
	for _, r := range recs {
		if r.State == NodeFailed {
			parts = append(parts, fmt.Sprintf("node %s failed: %s", r.Node, r.Message))
		}
	}
	if len(pending) > 0 {
		parts = append(parts, fmt.Sprintf("%d node(s) wait for the --max-unavailable-gpus budget (%s)", len(pending), strings.Join(pending, ", ")))
	}
	if len(parts) == 0 {
		return "not every node is drained"
	}
	return strings.Join(parts, "; ")
}

func incomplete(err error) error {
	if err == nil || errors.Is(err, ErrIncomplete) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrIncomplete, err)
}

func containsGang(gs []*Gang, g *Gang) bool {
	for _, x := range gs {
		if x.Key == g.Key {
			return true
		}
	}
	return false
}

func (d *Drainer) snapshot(nodes []string) []NodeRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]NodeRecord, 0, len(nodes))
	for _, n := range nodes {
		if r := d.records[n]; r != nil {
			out = append(out, *r)
		}
	}
	sortRecords(out)
	return out
}

// selectNodes applies --max-unavailable-gpus: nodes of this run already in
// progress count first, then the others in order while the budget allows.
func (d *Drainer) selectNodes(nodes []string, recs map[string]*NodeRecord, runID string) (selected, pending []string) {
	var total int64
	for _, n := range nodes {
		total += recs[n].GPUs
	}
	budget := d.Options.MaxUnavailableGPUs.Of(total)
	if budget < 0 {
		return nodes, nil
	}
	var used int64
	for _, n := range nodes {
		if r := recs[n]; r.RunID == runID && r.State.Active() {
			used += r.GPUs
			selected = append(selected, n)
		}
	}
	for _, n := range nodes {
		r := recs[n]
		if r.RunID == runID && r.State.Active() {
			continue
		}
		if used+r.GPUs <= budget || (used == 0 && len(selected) == 0 && budget > 0 && r.GPUs == 0) {
			used += r.GPUs
			selected = append(selected, n)
		} else {
			pending = append(pending, n)
		}
	}
	return selected, pending
}

func (d *Drainer) cordon(ctx context.Context, node string) error {
	r := d.records[node]
	now := d.clock().Now()
	yes := true
	if r.RunID == d.runID && r.State.Active() {
		if r.State == NodeFailed {
			// A re-run tries a failed node again from the start.
			if err := d.setNode(ctx, node, NodeCordoned, "", nil); err != nil {
				return err
			}
		}
		if !r.Unschedulable && r.State != NodeDrained {
			// Someone uncordoned it mid-run: cordon again, keeping the record.
			if err := d.patchNode(ctx, node, map[string]any{AnnUpdatedAt: timeString(now)}, &yes); err != nil {
				return err
			}
			r.Unschedulable = true
		}
		return nil
	}
	ann := map[string]any{
		AnnRunID:           d.runID,
		AnnState:           string(NodeCordoned),
		AnnWasCordoned:     fmt.Sprint(r.Unschedulable),
		AnnStartedAt:       timeString(now),
		AnnUpdatedAt:       timeString(now),
		AnnRequester:       nilIfEmpty(d.Options.Requester),
		AnnMessage:         nil,
		AnnGangs:           nil,
		AnnRestoredAt:      nil,
		AnnDisableEviction: nil,
	}
	if err := d.patchNode(ctx, node, ann, &yes); err != nil {
		return err
	}
	d.mu.Lock()
	r.RunID, r.State, r.WasCordoned, r.Unschedulable, r.StartedAt, r.UpdatedAt = d.runID, NodeCordoned, r.Unschedulable, true, now, now
	r.Requester, r.Message, r.Gangs, r.DisableEvictionBy = d.Options.Requester, "", nil, ""
	d.mu.Unlock()
	msg := "cordoned"
	if r.WasCordoned {
		msg = "cordoned (was already cordoned)"
	}
	d.emit(Event{Type: EventNode, Node: node, State: NodeCordoned, Message: msg})
	return nil
}

// stopGangs runs every gang through checkpoint and stop, at most
// MaxGangsInFlight at a time.
func (d *Drainer) stopGangs(ctx context.Context, gangs []*Gang) []GangOutcome {
	out := make([]GangOutcome, len(gangs))
	limit := d.Options.MaxGangsInFlight
	if limit <= 0 {
		limit = len(gangs)
	}
	if limit == 0 {
		return nil
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, g := range gangs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i] = d.outcome(g, ActionFailed, ctx.Err().Error())
				return
			}
			defer func() { <-sem }()
			out[i] = d.handleGang(ctx, g)
		}()
	}
	wg.Wait()
	return out
}

func (d *Drainer) outcome(g *Gang, action, msg string) GangOutcome {
	return GangOutcome{Key: g.Key, Kind: g.Kind, Namespace: g.Namespace, Name: g.Name, Method: g.Method,
		Support: d.keys().SupportOf(g.Labels, g.Annotations), Action: action, Message: msg, GPUs: g.GPUs, Ranks: g.Ranks}
}

// protocolTarget is where a gang's requests live: the root object, else
// the Kueue Workload, else (bare pod group) its first pod.
func protocolTarget(g *Gang) (checkpoint.Target, bool) {
	switch {
	case g.Root != nil:
		return g.Root.Target(), true
	case g.Workload != nil:
		return g.Workload.Target(), true
	case len(g.Pods) > 0:
		return checkpoint.Target{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: g.Namespace, Name: g.Pods[0].Name}, true
	}
	return checkpoint.Target{}, false
}

// mirrorPods lists the pods a request is mirrored onto: every pod of a
// gang that asked for it with the MirrorToPods key, or of a bare pod group
// (whose request lives on its first pod); none otherwise. Mirroring is one
// PATCH per pod, before the drain can watch for the answer: for a gang of
// 512 ranks at client-go's request rate that alone took longer than the
// checkpoint, and a responder reads the root object anyway.
func mirrorPods(keys checkpoint.Keys, g *Gang) []string {
	if g.Root == nil && g.Workload == nil || keys.WantsPodMirror(g.Labels, g.Annotations) {
		return g.PodNames()
	}
	return nil
}

// stopTarget is where the stop record lives (nil for a bare pod group
// without a Workload: its pods are deleted and nothing remains).
func stopTarget(g *Gang) *checkpoint.Target {
	switch {
	case g.Root != nil:
		t := g.Root.Target()
		return &t
	case g.Workload != nil:
		t := g.Workload.Target()
		return &t
	}
	return nil
}

func (d *Drainer) gangEvent(g *Gang, format string, args ...any) {
	d.emit(Event{Type: EventGang, Gang: g.Key, Message: fmt.Sprintf(format, args...)})
}

// handleGang asks one gang to checkpoint, applies --on-timeout, and stops it.
func (d *Drainer) handleGang(ctx context.Context, g *Gang) GangOutcome {
	o := d.outcome(g, ActionFailed, "")
	keys := d.keys()
	// A gang this run already began to stop goes straight to the stop.
	if g.Annotations[AnnStoppedByRun] == d.runID && g.Root != nil || g.Annotations[AnnStoppedByRun] == d.runID && g.Workload != nil {
		o.Verdict = checkpoint.Verdict{Phase: checkpoint.PhaseReady, Reason: "stop already under way in this run"}
		return d.stop(ctx, g, o)
	}
	if g.Method == StopUnsupported {
		o.Action, o.Message = ActionAborted, g.Problem
		d.gangEvent(g, "cannot be stopped as a unit: %s", g.Problem)
		return o
	}
	verdict, reqID, err := d.checkpoint(ctx, g)
	o.Verdict, o.RequestID = verdict, reqID
	if err != nil {
		o.Message, o.cause = err.Error(), err
		return o
	}
	if verdict.Phase == checkpoint.PhaseReady {
		return d.stop(ctx, g, o)
	}
	switch d.Options.OnTimeout {
	case OnTimeoutStop:
		d.emit(Event{Type: EventWarning, Gang: g.Key, Message: fmt.Sprintf("gang %s: %s; stopping it anyway (--on-timeout=stop): work since its last checkpoint is lost", g.Key, verdict.Reason)})
		return d.stop(ctx, g, o)
	default:
		if reqID != "" {
			if t, ok := protocolTarget(g); ok {
				st, _ := d.readCheckpoint(ctx, keys, t)
				rq := &checkpoint.Requester{Client: d.Dynamic, Pods: d.Kube, Keys: keys}
				if err := d.retry(ctx, func() error { return rq.Cancel(ctx, t, st.Request, mirrorPods(keys, g)) }); err != nil {
					o.Message, o.cause = err.Error(), err
					return o
				}
			}
		}
		o.Action, o.Message = ActionAborted, verdict.Reason+" (--on-timeout=abort; request withdrawn, gang left running)"
		d.gangEvent(g, "%s", o.Message)
		return o
	}
}

// checkpoint runs the protocol for one gang until a verdict (or ctx ends).
func (d *Drainer) checkpoint(ctx context.Context, g *Gang) (checkpoint.Verdict, string, error) {
	keys := d.keys()
	if keys.SupportOf(g.Labels, g.Annotations) == checkpoint.SupportNo {
		v := checkpoint.Verdict{Phase: checkpoint.PhaseTimedOut, Reason: "does not speak the checkpoint-and-yield protocol"}
		if d.Options.OnTimeout == OnTimeoutWait {
			d.gangEvent(g, "does not speak the checkpoint-and-yield protocol; waiting for it to finish (--on-timeout=wait)")
			return d.waitFinished(ctx, g, v)
		}
		return v, "", nil
	}
	t, ok := protocolTarget(g)
	if !ok {
		return checkpoint.Verdict{Phase: checkpoint.PhaseTimedOut, Reason: "no object to send a request to"}, "", nil
	}
	st, err := d.readCheckpoint(ctx, keys, t)
	if err != nil {
		return checkpoint.Verdict{}, "", err
	}
	req := st.Request
	rq := &checkpoint.Requester{Client: d.Dynamic, Pods: d.Kube, Keys: keys}
	if !(st.HasRequest && req.Active() && belongsToRun(req.ID, d.runID)) {
		now := d.clock().Now()
		req = checkpoint.Request{State: checkpoint.Requested, ID: nextRequestID(st, d.runID), RequestedAt: now,
			Reason: d.Options.Reason, Requester: d.Options.Requester}
		if d.Options.CheckpointDeadline > 0 {
			req.Deadline = now.Add(d.Options.CheckpointDeadline)
		}
		if err := d.retry(ctx, func() error { return rq.Request(ctx, t, req, mirrorPods(keys, g)) }); err != nil {
			return checkpoint.Verdict{}, "", err
		}
		d.gangEvent(g, "checkpoint requested on %s (request %s)", t, req.ID)
	} else {
		d.gangEvent(g, "waiting for the checkpoint requested earlier in this run (request %s)", req.ID)
	}
	last := checkpoint.Status("?")
	warned := false
	for {
		st, err := d.readCheckpoint(ctx, keys, t)
		if err != nil {
			if ctx.Err() != nil {
				return checkpoint.Verdict{}, req.ID, ctx.Err()
			}
			return checkpoint.Verdict{}, req.ID, err
		}
		if st.Response.ObservedRequestID == req.ID && st.Response.Status != last {
			last = st.Response.Status
			msg := string(last)
			if st.Response.Step != "" {
				msg += " (step " + st.Response.Step + ")"
			}
			if st.Response.Message != "" {
				msg += ": " + st.Response.Message
			}
			d.gangEvent(g, "checkpoint %s", msg)
		}
		v := checkpoint.Evaluate(d.clock().Now(), req, st.Response, d.Options.Timeouts)
		if v.Done() {
			if v.Phase == checkpoint.PhaseReady || d.Options.OnTimeout != OnTimeoutWait {
				return v, req.ID, nil
			}
			if !warned {
				d.emit(Event{Type: EventWarning, Gang: g.Key, Message: fmt.Sprintf("gang %s: %s; still waiting (--on-timeout=wait)", g.Key, v.Reason)})
				warned = true
			}
		}
		if err := d.sleep(ctx, d.Options.poll()); err != nil {
			return checkpoint.Verdict{}, req.ID, err
		}
	}
}

func belongsToRun(id, run string) bool { return id == run || strings.HasPrefix(id, run+"-r") }

// nextRequestID returns the run id, or run-rN after N withdrawn requests of
// the same run, so that a responder (which acts once per id) answers again.
func nextRequestID(st checkpoint.State, run string) string {
	if !st.HasRequest || !belongsToRun(st.Request.ID, run) {
		return run
	}
	n := 1
	if rest, ok := strings.CutPrefix(st.Request.ID, run+"-r"); ok {
		fmt.Sscanf(rest, "%d", &n)
		n++
	}
	return fmt.Sprintf("%s-r%d", run, n)
}

// waitFinished waits for a gang that cannot checkpoint to end by itself.
func (d *Drainer) waitFinished(ctx context.Context, g *Gang, v checkpoint.Verdict) (checkpoint.Verdict, string, error) {
	for {
		left, err := d.gangPodsLeft(ctx, g)
		if err != nil {
			return v, "", err
		}
		if left == 0 {
			return checkpoint.Verdict{Phase: checkpoint.PhaseReady, Reason: "finished by itself"}, "", nil
		}
		if err := d.sleep(ctx, d.Options.poll()); err != nil {
			return v, "", err
		}
	}
}

// gangPodsLeft counts the gang's pods that still exist (by UID).
func (d *Drainer) gangPodsLeft(ctx context.Context, g *Gang) (int, error) {
	var list *corev1.PodList
	err := d.retry(ctx, func() (err error) {
		list, err = d.Kube.CoreV1().Pods(g.Namespace).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("listing pods in namespace %s: %w", g.Namespace, err)
	}
	uids := map[types.UID]bool{}
	for _, p := range g.Pods {
		uids[p.UID] = true
	}
	n := 0
	for _, p := range list.Items {
		if uids[p.UID] && !podDone(&p) {
			n++
		}
	}
	return n, nil
}

func mergePatch(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// stop stops a gang as a unit and waits until its pods are gone.
func (d *Drainer) stop(ctx context.Context, g *Gang, o GangOutcome) GangOutcome {
	fail := func(err error) GangOutcome {
		o.Action, o.Message, o.cause = ActionFailed, err.Error(), err
		d.gangEvent(g, "stop failed: %v", err)
		return o
	}
	// Record on the nodes first (restore finds gangs there), then on the root.
	if err := d.markStopping(ctx, g); err != nil {
		return fail(err)
	}
	now := d.clock().Now()
	o.StopStartedAt = now
	if t := stopTarget(g); t != nil {
		ann := map[string]any{AnnStoppedByRun: d.runID, AnnStopMethod: string(g.Method), AnnStopState: GangStopping}
		if g.Annotations[AnnStoppedByRun] != d.runID {
			ann[AnnStoppedAt] = timeString(now)
			ann[AnnRestoredBy], ann[AnnRestoredAt] = nil, nil
		}
		if g.Method == StopScaleToZero && g.Annotations[AnnReplicas] == "" {
			var u *unstructured.Unstructured
			err := d.retry(ctx, func() (err error) {
				u, err = d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Get(ctx, g.Name, metav1.GetOptions{})
				return err
			})
			if err != nil {
				return fail(err)
			}
			replicas, _, _ := unstructuredInt(u.Object, "spec", "replicas")
			ann[AnnReplicas] = fmt.Sprint(replicas)
		}
		if err := d.retry(ctx, func() error { return checkpoint.Patch(ctx, d.Dynamic, *t, ann) }); err != nil {
			return fail(err)
		}
	}
	d.gangEvent(g, "stopping as a unit (%s, %d ranks, %d GPUs)", g.Method, g.Ranks, g.GPUs)
	if err := d.retry(ctx, func() error { return d.applyStop(ctx, g) }); err != nil {
		return fail(err)
	}
	if err := d.waitGone(ctx, g); err != nil {
		return fail(err)
	}
	o.PodsGoneAt = d.clock().Now()
	if t := stopTarget(g); t != nil {
		ann := map[string]any{AnnStopState: GangStopped}
		// Clear the request so that the gang does not yield again when it
		// is readmitted; the answer stays as history.
		for k, v := range d.keys().ClearRequestPatch() {
			ann[k] = v
		}
		if err := d.retry(ctx, func() error { return checkpoint.Patch(ctx, d.Dynamic, *t, ann) }); err != nil {
			return fail(err)
		}
	}
	o.Action = ActionStopped
	d.gangEvent(g, "stopped: %d pods gone in %s", g.Ranks, o.PodsGoneAt.Sub(o.StopStartedAt).Round(10*time.Millisecond))
	return o
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[f]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	case int:
		return int64(v), true, nil
	}
	return 0, false, nil
}

// markStopping records the gang on each chosen node it has a rank on and
// moves the node to NodeStopping, one patch per node and the nodes in
// parallel: between the gang's ready-to-stop and its stop nothing else
// waits on these writes, and a cell's gang spans a rack set of nodes.
func (d *Drainer) markStopping(ctx context.Context, g *Gang) error {
	rec := RecordOf(g)
	var nodes []string
	seen := map[string]bool{}
	for _, p := range g.Pods {
		if p.OnChosenNode && !seen[p.Node] {
			seen[p.Node] = true
			nodes = append(nodes, p.Node)
		}
	}
	var eg errgroup.Group
	eg.SetLimit(maxNodeWrites)
	for _, node := range nodes {
		eg.Go(func() error { return d.recordStopping(ctx, node, rec) })
	}
	return eg.Wait()
}

// maxNodeWrites bounds the node patches markStopping has in flight.
const maxNodeWrites = 16

// recordStopping merges rec into the node's gang record and advances the
// node to NodeStopping in a single patch; it writes nothing when both are
// there already. Gangs stop concurrently, so the read-merge-write of one
// node is serialised.
func (d *Drainer) recordStopping(ctx context.Context, node string, rec GangRecord) error {
	mu, _ := d.nodeMu.LoadOrStore(node, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	d.mu.Lock()
	r := d.records[node]
	var gangs []GangRecord
	cur := NodePending
	if r != nil {
		gangs, cur = r.Gangs, r.State
	}
	d.mu.Unlock()
	recorded := false
	for _, g := range gangs {
		if g.Key == rec.Key {
			recorded = true
			break
		}
	}
	advance := cur != NodeFailed && stateOrder[cur] < stateOrder[NodeStopping]
	if recorded && !advance {
		return nil
	}
	var extra map[string]any
	var merged []GangRecord
	if !recorded {
		merged = mergeGangRecords(gangs, rec)
		extra = map[string]any{AnnGangs: gangsJSON(merged)}
	}
	var err error
	if advance {
		err = d.setNode(ctx, node, NodeStopping, "", extra)
	} else {
		err = d.patchNode(ctx, node, extra, nil)
	}
	if err != nil || recorded {
		return err
	}
	d.mu.Lock()
	if r != nil {
		r.Gangs = merged
	}
	d.mu.Unlock()
	return nil
}

func suspendPath(k Kind) []string {
	switch k {
	case KindPyTorchJob, KindMPIJob:
		return []string{"spec", "runPolicy", "suspend"}
	}
	return []string{"spec", "suspend"}
}

func nested(path []string, v any) map[string]any {
	var out any = v
	for i := len(path) - 1; i >= 0; i-- {
		out = map[string]any{path[i]: out}
	}
	return out.(map[string]any)
}

// applyStop issues the stop itself; every method is idempotent.
func (d *Drainer) applyStop(ctx context.Context, g *Gang) error {
	switch g.Method {
	case StopKueue:
		if d.Kueue == nil {
			return errors.New("the gang is managed by Kueue but no Kueue client is available")
		}
		_, err := d.Kueue.KueueV1beta2().Workloads(g.Namespace).Patch(ctx, g.Workload.Name, types.MergePatchType,
			mergePatch(map[string]any{"spec": map[string]any{"active": false}}), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("deactivating Kueue workload %s/%s: %w", g.Namespace, g.Workload.Name, err)
		}
	case StopSuspend:
		_, err := d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Patch(ctx, g.Name, types.MergePatchType,
			mergePatch(nested(suspendPath(g.Kind), true)), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("suspending %s %s/%s: %w", g.Kind, g.Namespace, g.Name, err)
		}
	case StopScaleToZero:
		_, err := d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Patch(ctx, g.Name, types.MergePatchType,
			mergePatch(map[string]any{"spec": map[string]any{"replicas": 0}}), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("scaling %s %s/%s to zero: %w", g.Kind, g.Namespace, g.Name, err)
		}
	case StopDeletePods:
		// Delete every pod together, each with its own grace period.
		var wg sync.WaitGroup
		errs := make([]error, len(g.Pods))
		for i, p := range g.Pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				uid := p.UID
				err := d.Kube.CoreV1().Pods(g.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					errs[i] = fmt.Errorf("deleting pod %s/%s: %w", g.Namespace, p.Name, err)
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	default:
		return fmt.Errorf("gang %s cannot be stopped as a unit: %s", g.Key, g.Problem)
	}
	return nil
}

// waitGone waits until every pod of the gang is gone (and, under Kueue,
// the workload is no longer admitted).
func (d *Drainer) waitGone(ctx context.Context, g *Gang) error {
	deadline := d.clock().Now().Add(d.Options.stopTimeout())
	for {
		left, err := d.gangPodsLeft(ctx, g)
		if err != nil {
			return err
		}
		admitted := false
		if g.Method == StopKueue && d.Kueue != nil {
			var wl *kueuev1beta2.Workload
			err := d.retry(ctx, func() (err error) {
				wl, err = d.Kueue.KueueV1beta2().Workloads(g.Namespace).Get(ctx, g.Workload.Name, metav1.GetOptions{})
				return err
			})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("reading Kueue workload %s/%s: %w", g.Namespace, g.Workload.Name, err)
			}
			if err == nil {
				admitted = conditionTrue(wl.Status.Conditions, "Admitted")
			}
		}
		if left == 0 && !admitted {
			return nil
		}
		if d.clock().Now().After(deadline) {
			return fmt.Errorf("%d pod(s) of gang %s still exist after %s", left, g.Key, d.Options.stopTimeout())
		}
		if err := d.sleep(ctx, d.Options.poll()); err != nil {
			return err
		}
	}
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// drainNode evicts the pods left on a node (PDB-aware through
// pkg/eviction) and waits for them to go.
func (d *Drainer) drainNode(ctx context.Context, node string, found *Discovery) error {
	if err := d.advance(ctx, node, NodeDraining); err != nil {
		return err
	}
	var pods []corev1.Pod
	err := d.retry(ctx, func() (err error) {
		pods, err = ListNodePods(ctx, d.Kube, node)
		return err
	})
	if err != nil {
		return err
	}
	var evict []*corev1.Pod
	var blockers []string
	for i := range pods {
		p := &pods[i]
		if podDone(p) || isDaemonOrMirror(p) || p.DeletionTimestamp != nil {
			continue
		}
		if key, ok := found.GangOf[p.UID]; ok {
			blockers = append(blockers, fmt.Sprintf("pod %s/%s of gang %s is still running", p.Namespace, p.Name, key))
			continue
		}
		if hasEmptyDir(p) && !d.Options.DeleteEmptyDirData {
			blockers = append(blockers, fmt.Sprintf("pod %s/%s has emptyDir data (pass --delete-emptydir-data)", p.Namespace, p.Name))
			continue
		}
		if metav1.GetControllerOf(p) == nil && !d.Options.Force {
			blockers = append(blockers, fmt.Sprintf("pod %s/%s has no controller (pass --force)", p.Namespace, p.Name))
			continue
		}
		evict = append(evict, p)
	}
	if len(blockers) > 0 {
		return errors.New(strings.Join(blockers, "; "))
	}
	if d.Options.DisableEviction && len(evict) > 0 {
		who := d.Options.Requester
		if who == "" {
			who = "unknown"
		}
		by := fmt.Sprintf("%s at %s", who, timeString(d.clock().Now()))
		if err := d.setNode(ctx, node, NodeDraining, "", map[string]any{AnnDisableEviction: by}); err != nil {
			return err
		}
		d.mu.Lock()
		d.records[node].DisableEvictionBy = by
		d.mu.Unlock()
		d.emit(Event{Type: EventWarning, Node: node, Message: fmt.Sprintf("node %s: --disable-eviction: deleting %d pod(s) directly, bypassing PodDisruptionBudgets (recorded as %s)", node, len(evict), by)})
	}
	h := eviction.NewHelper(d.Kube)
	h.Clock = d.clock()
	h.Timeout = d.Options.EvictionTimeout
	h.OnRefused = func(p *corev1.Pod, r eviction.Result, in time.Duration) {
		d.emit(Event{Type: EventPod, Node: node, Message: fmt.Sprintf("eviction of pod %s/%s refused (%s), retrying in %s", p.Namespace, p.Name, r.Reason, in.Round(time.Second))})
	}
	for i, p := range evict {
		if d.Options.DisableEviction {
			uid := p.UID
			err := d.retry(ctx, func() error {
				return d.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			d.emit(Event{Type: EventPod, Node: node, Message: fmt.Sprintf("deleted pod %s/%s (node %s, %d/%d)", p.Namespace, p.Name, node, i+1, len(evict))})
			continue
		}
		if err := d.evict(ctx, h, p); err != nil {
			return err
		}
		d.emit(Event{Type: EventPod, Node: node, Message: fmt.Sprintf("evicted pod %s/%s (node %s, %d/%d)", p.Namespace, p.Name, node, i+1, len(evict))})
	}
	if err := d.waitEvicted(ctx, node, evict); err != nil {
		return err
	}
	return d.advance(ctx, node, NodeDrained)
}

// waitEvicted waits until the evicted pods are gone from node (deleted, or
// replaced by a pod of another UID), with one list of the node's pods per
// poll rather than a GET per pod: on a node of a hundred pods that is one
// request a poll instead of a hundred. --eviction-timeout bounds the wait.
func (d *Drainer) waitEvicted(ctx context.Context, node string, evicted []*corev1.Pod) error {
	if len(evicted) == 0 {
		return nil
	}
	var deadline time.Time
	if d.Options.EvictionTimeout > 0 {
		deadline = d.clock().Now().Add(d.Options.EvictionTimeout)
	}
	for {
		var pods []corev1.Pod
		err := d.retry(ctx, func() (err error) {
			pods, err = ListNodePods(ctx, d.Kube, node)
			return err
		})
		if err != nil {
			return err
		}
		present := make(map[types.UID]bool, len(pods))
		for i := range pods {
			present[pods[i].UID] = true
		}
		var left []string
		for _, p := range evicted {
			if present[p.UID] {
				left = append(left, p.Namespace+"/"+p.Name)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if !deadline.IsZero() && !d.clock().Now().Before(deadline) {
			return fmt.Errorf("%w: %d evicted pod(s) still on node %s after %s: %s", eviction.ErrDeadline, len(left), node, d.Options.EvictionTimeout, strings.Join(left, ", "))
		}
		if err := d.sleep(ctx, d.Options.poll()); err != nil {
			return err
		}
	}
}

func hasEmptyDir(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}
