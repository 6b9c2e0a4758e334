package inference

import (
	"sort"

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
