package inference

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

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
