package gang

// The node records of a drain run: reading them, choosing the run to resume,
// moving a node through its states, and cordoning.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
