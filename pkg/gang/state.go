package gang

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// NodeState is where a node stands in a drain run.
type NodeState string

// Node states, in order. Failed can follow any state before drained.
const (
	NodePending       NodeState = ""
	NodeCordoned      NodeState = "cordoned"
	NodeCheckpointing NodeState = "checkpointing"
	NodeStopping      NodeState = "stopping"
	NodeDraining      NodeState = "draining"
	NodeDrained       NodeState = "drained"
	NodeRestoring     NodeState = "restoring"
	NodeDone          NodeState = "done"
	NodeFailed        NodeState = "failed"
)

// Active reports whether the state belongs to a run that has not finished
// (restore not done).
func (s NodeState) Active() bool { return s != NodePending && s != NodeDone }

// Annotation keys of the drain state, on nodes and on gang root objects.
const (
	StatePrefix = "gpufleet.dev/gang-drain."

	AnnRunID           = StatePrefix + "run-id"
	AnnState           = StatePrefix + "state"
	AnnWasCordoned     = StatePrefix + "was-cordoned"
	AnnUpdatedAt       = StatePrefix + "updated-at"
	AnnStartedAt       = StatePrefix + "started-at"
	AnnMessage         = StatePrefix + "message"
	AnnRequester       = StatePrefix + "requester"
	AnnDisableEviction = StatePrefix + "disable-eviction-by"
	AnnGangs           = StatePrefix + "gangs"

	AnnStoppedByRun = StatePrefix + "stopped-by-run"
	AnnStopMethod   = StatePrefix + "stop-method"
	AnnStopState    = StatePrefix + "stop-state"
	AnnStoppedAt    = StatePrefix + "stopped-at"
	AnnReplicas     = StatePrefix + "replicas"
	AnnRestoredBy   = StatePrefix + "restored-by-run"
	AnnRestoredAt   = StatePrefix + "restored-at"
	// AnnGangRecord is the gang's GangRecord (JSON) on its stop object, so
	// that restore finds a gang whose nodes a provider replaced.
	AnnGangRecord = StatePrefix + "gang"
)

// Gang stop states recorded on root objects.
const (
	GangStopping = "stopping"
	GangStopped  = "stopped"
	GangAborted  = "aborted"
)

// GangRecord is what a node remembers about a gang a run stopped, so that
// restore can find it.
type GangRecord struct {
	Key       string     `json:"key"`
	Kind      Kind       `json:"kind"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Root      *Object    `json:"root,omitempty"`
	Workload  *Object    `json:"workload,omitempty"`
	Method    StopMethod `json:"method"`
	GPUs      int64      `json:"gpus"`
	Ranks     int        `json:"ranks"`
}

// RecordOf returns the record of a gang.
func RecordOf(g *Gang) GangRecord {
	return GangRecord{Key: g.Key, Kind: g.Kind, Namespace: g.Namespace, Name: g.Name, Root: g.Root, Workload: g.Workload, Method: g.Method, GPUs: g.GPUs, Ranks: g.Ranks}
}

// NodeRecord is a node's drain state as recorded in its annotations.
type NodeRecord struct {
	Node               string       `json:"node"`
	RunID              string       `json:"runID,omitempty"`
	State              NodeState    `json:"state"`
	WasCordoned        bool         `json:"wasCordoned"`
	Unschedulable      bool         `json:"unschedulable"`
	StartedAt          time.Time    `json:"startedAt,omitzero"`
	UpdatedAt          time.Time    `json:"updatedAt,omitzero"`
	Message            string       `json:"message,omitempty"`
	Requester          string       `json:"requester,omitempty"`
	DisableEvictionBy  string       `json:"disableEvictionBy,omitempty"`
	Gangs              []GangRecord `json:"gangs,omitempty"`
	GPUs               int64        `json:"gpus"`
	ResourceVersion    string       `json:"-"`
	recordedCordonFlag bool
}

// ReadNodeRecord parses a node's drain annotations.
func ReadNodeRecord(n *corev1.Node, gpuResources []corev1.ResourceName) NodeRecord {
	a := n.Annotations
	r := NodeRecord{
		Node:              n.Name,
		RunID:             a[AnnRunID],
		State:             NodeState(a[AnnState]),
		Unschedulable:     n.Spec.Unschedulable,
		Message:           a[AnnMessage],
		Requester:         a[AnnRequester],
		DisableEvictionBy: a[AnnDisableEviction],
		ResourceVersion:   n.ResourceVersion,
	}
	r.WasCordoned, _ = strconv.ParseBool(a[AnnWasCordoned])
	_, r.recordedCordonFlag = a[AnnWasCordoned]
	r.StartedAt, _ = time.Parse(time.RFC3339, a[AnnStartedAt])
	r.UpdatedAt, _ = time.Parse(time.RFC3339, a[AnnUpdatedAt])
	if s := a[AnnGangs]; s != "" {
		_ = json.Unmarshal([]byte(s), &r.Gangs)
	}
	if len(gpuResources) == 0 {
		gpuResources = DefaultGPUResources
	}
	for _, res := range gpuResources {
		if q, ok := n.Status.Allocatable[res]; ok {
			r.GPUs += q.Value()
		}
	}
	return r
}

// NewRunID returns a fresh run id: gd-<UTC time>-<4 hex digits>.
func NewRunID(now time.Time) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return "gd-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func patchNode(ctx context.Context, c kubernetes.Interface, node string, ann map[string]any, unschedulable *bool) error {
	body := map[string]any{"metadata": map[string]any{"annotations": ann}}
	if unschedulable != nil {
		body["spec"] = map[string]any{"unschedulable": *unschedulable}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("updating node %s: %w", node, err)
	}
	return nil
}

func mergeGangRecords(old []GangRecord, add ...GangRecord) []GangRecord {
	byKey := map[string]GangRecord{}
	for _, g := range old {
		byKey[g.Key] = g
	}
	for _, g := range add {
		byKey[g.Key] = g
	}
	out := make([]GangRecord, 0, len(byKey))
	for _, k := range sortedKeys(byKey) {
		out = append(out, byKey[k])
	}
	return out
}

func gangsJSON(gs []GangRecord) string {
	if len(gs) == 0 {
		return ""
	}
	b, _ := json.Marshal(gs)
	return string(b)
}

// RunSummary groups node records by run, for status.
type RunSummary struct {
	RunID     string       `json:"runID"`
	Requester string       `json:"requester,omitempty"`
	StartedAt time.Time    `json:"startedAt,omitzero"`
	Nodes     []NodeRecord `json:"nodes"`
	Gangs     []GangStatus `json:"gangs"`
	// Phase is the least advanced state over the run's nodes.
	Phase NodeState `json:"phase"`
}

// GangStatus is a gang's current state as seen by status.
type GangStatus struct {
	GangRecord
	StoppedByRun     string `json:"stoppedByRun,omitempty"`
	StopState        string `json:"stopState,omitempty"`
	StoppedAt        string `json:"stoppedAt,omitempty"`
	CheckpointStatus string `json:"checkpointStatus,omitempty"`
	CheckpointStep   string `json:"checkpointStep,omitempty"`
	CheckpointURI    string `json:"checkpointURI,omitempty"`
	Restored         bool   `json:"restored"`
	Message          string `json:"message,omitempty"`
	// DeletedPods are the pods the run deleted itself once the gang's Jobs
	// were suspended.
	DeletedPods *DeletedPods `json:"deletedPods,omitempty"`
}

var stateOrder = map[NodeState]int{
	NodeFailed: 0, NodePending: 1, NodeCordoned: 2, NodeCheckpointing: 3, NodeStopping: 4,
	NodeDraining: 5, NodeDrained: 6, NodeRestoring: 7, NodeDone: 8,
}

// RunPhase returns the least advanced state of the records.
func RunPhase(recs []NodeRecord) NodeState {
	if len(recs) == 0 {
		return NodePending
	}
	p := recs[0].State
	for _, r := range recs[1:] {
		if stateOrder[r.State] < stateOrder[p] {
			p = r.State
		}
	}
	return p
}

func sortRecords(recs []NodeRecord) {
	sort.Slice(recs, func(i, j int) bool { return recs[i].Node < recs[j].Node })
}
