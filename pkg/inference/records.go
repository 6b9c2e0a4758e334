package inference

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

// Runs returns the inference runs recorded on nodes: the run a node's
// pkg/gang record names when AnnInferenceRun names the same run. With
// activeOnly, only runs not yet restored (their node state Active).
func Runs(nodes []*corev1.Node, activeOnly bool) []string {
	seen := map[string]bool{}
	for _, n := range nodes {
		if n == nil {
			continue
		}
		rec := gang.ReadNodeRecord(n, nil)
		id := n.Annotations[AnnInferenceRun]
		if id == "" || id != rec.RunID || (activeOnly && !rec.State.Active()) {
			continue
		}
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// recordedModels returns the models a run recorded on a node it drained
// (AnnInferenceModels), or nil when the node carries no record of that run.
func recordedModels(n *corev1.Node, runID string) []string {
	if runID == "" || n.Annotations[AnnInferenceRun] != runID {
		return nil
	}
	var out []string
	for _, k := range strings.Split(n.Annotations[AnnInferenceModels], ",") {
		if k = strings.TrimSpace(k); strings.Contains(k, "/") {
			out = append(out, k)
		}
	}
	return out
}

// mergeModels is the sorted union of a node's recorded models and keys,
// joined as AnnInferenceModels holds them.
func mergeModels(recorded string, keys []string) string {
	set := map[string]bool{}
	for _, k := range strings.Split(recorded, ",") {
		if k = strings.TrimSpace(k); k != "" {
			set[k] = true
		}
	}
	for _, k := range keys {
		set[k] = true
	}
	return strings.Join(sortedKeys(set), ",")
}

// AnnInferenceUnplaced is recorded on each node of a wave before the run
// drains it: the replicas per model that the plan leaves without a GPU
// once that wave is drained (Wave.Unplaced, Pending until the pool is
// back), with the run and the wave's nodes. A resumed run plans only the
// nodes left, so it reads them back from here.
const AnnInferenceUnplaced = gang.StatePrefix + "inference-unplaced"

// unplacedRecord is the value of AnnInferenceUnplaced.
type unplacedRecord struct {
	Run      string           `json:"run"`
	Wave     []string         `json:"wave"`
	Unplaced map[string]int32 `json:"unplaced"`
}

// recordUnplaced records on each node of w what the plan leaves without a
// GPU once w is drained; a wave that leaves every replica placed records
// nothing.
func (r *Runner) recordUnplaced(ctx context.Context, runID string, w *Wave) error {
	if len(w.Unplaced) == 0 {
		return nil
	}
	v, err := json.Marshal(unplacedRecord{Run: runID, Wave: w.Nodes, Unplaced: w.Unplaced})
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnInferenceUnplaced: string(v)}}})
	for _, n := range w.Nodes {
		if _, err := r.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("updating node %s: %w", n, err)
		}
	}
	return nil
}

// unplacedAtStart returns, per model, the replicas that may stay
// Unschedulable when the run reaches its waves: on a fresh run those
// Pending before it (plan's Pending, read before the cordon). A resumed
// run's read also counts the replicas its own waves displaced and the
// scheduler could not place, so it counts instead the pods with no node
// created before the run started (the earliest gang started-at among the
// run's nodes), plus what the waves it already drained left without a
// GPU (AnnInferenceUnplaced, counted once per wave whose nodes are all
// drained).
func (r *Runner) unplacedAtStart(ctx context.Context, plan *Plan, nodes []string, runID string, resumed bool) (map[string]int32, error) {
	out := map[string]int32{}
	if !resumed {
		for _, mp := range plan.Models {
			out[mp.Key] = mp.Pending
		}
		return out, nil
	}
	var started time.Time
	drained := map[string]bool{}
	records := map[string]unplacedRecord{}
	for _, name := range nodes {
		n, err := r.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		rec := gang.ReadNodeRecord(n, r.GPUResources)
		if rec.RunID != runID {
			continue
		}
		if !rec.StartedAt.IsZero() && (started.IsZero() || rec.StartedAt.Before(started)) {
			started = rec.StartedAt
		}
		drained[name] = rec.State == gang.NodeDrained
		var u unplacedRecord
		if v := n.Annotations[AnnInferenceUnplaced]; v != "" && json.Unmarshal([]byte(v), &u) == nil && u.Run == runID && len(u.Wave) > 0 {
			records[strings.Join(u.Wave, ",")] = u
		}
	}
	for _, k := range sortedKeys(records) {
		u := records[k]
		all := true
		for _, n := range u.Wave {
			all = all && drained[n]
		}
		if !all {
			continue // not drained yet: the plan of the nodes left counts it
		}
		for m, c := range u.Unplaced {
			out[m] += c
		}
	}
	for _, mp := range plan.Models {
		pods, err := r.Kube.CoreV1().Pods(mp.Namespace).List(ctx, metav1.ListOptions{LabelSelector: mp.Selector})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of %s: %w", mp.Key, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			// started-at is whole seconds (RFC 3339): a pod of the same
			// second counts as the run's own, so a resume errs on stopping.
			if p.Spec.NodeName == "" && !podFinished(p) && p.DeletionTimestamp == nil && p.CreationTimestamp.Time.Before(started) {
				out[mp.Key]++
			}
		}
	}
	return out, nil
}
