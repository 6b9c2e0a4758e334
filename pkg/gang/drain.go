package gang

// The drain run: its types and events, Run (choose or resume the run, cordon,
// stop the gangs, evict the rest) and the bookkeeping of what is left to do.
// The steps live beside it: drain_nodes.go (node records and cordon),
// drain_checkpoint.go (checkpoint-and-yield), drain_stop.go (stopping a gang
// as a unit) and drain_evict.go (evicting what remains).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
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
	// DeletedPods are the pods the run deleted itself once the gang's Jobs
	// were suspended (also recorded on the gang's stop object); the other
	// pods of the gang were deleted by their Job controller.
	DeletedPods *DeletedPods `json:"deletedPods,omitempty"`

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
	// PodClient returns the client that deletes one stopped gang's pods
	// (Options.DeleteStoppedPods). Each call returns a client with a rate
	// limiter of its own, so that one gang's deletes never wait behind
	// another's; nil uses Kube.
	PodClient func() (kubernetes.Interface, error)

	mu       sync.Mutex
	gateOnce sync.Once
	gate     *fairGate // the pod writes of stopped gangs in flight
	nodeMu   sync.Map  // node name -> *sync.Mutex: one read-merge-write of a node's gang record at a time
	records  map[string]*NodeRecord
	runID    string
}

func (d *Drainer) podGate() *fairGate {
	d.gateOnce.Do(func() { d.gate = newFairGate(podWritesInFlight) })
	return d.gate
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
	// firstErr is the first error of a node's drain; cause the error
	// behind a gang that kept its nodes from draining, a refusal first.
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
				if o.cause != nil && (cause == nil || refused(o.cause) && !refused(cause)) {
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

// refused reports a request the API server refused for the caller's
// credentials or role: what blocked the run when several gangs failed
// (the worst exit code wins, and a refusal names what to grant).
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
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
