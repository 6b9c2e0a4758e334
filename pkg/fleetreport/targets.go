package fleetreport

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// Target is one cluster to report on.
type Target struct {
	// Name identifies the row; Context is the kubeconfig context.
	Name    string
	Context string
	// Ring is the ring the cluster is in ("" for none).
	Ring string
	// Provider, when set, overrides detection.
	Provider string
	Labels   map[string]string
}

// FleetTargets returns the clusters of a fleet file, each in the first
// ring whose selector matches its labels; with no rings, or none
// matching, the gpufleet.dev/ring label names the ring.
func FleetTargets(f *fleetfile.Fleet) []Target {
	out := make([]Target, 0, len(f.Spec.Clusters))
	for _, c := range f.Spec.Clusters {
		out = append(out, Target{Name: c.Name, Context: c.ContextName(), Ring: RingOf(f, c.Labels), Provider: c.Provider, Labels: c.Labels})
	}
	return out
}

// RingOf returns the ring of a cluster with these labels.
func RingOf(f *fleetfile.Fleet, ls map[string]string) string {
	for _, r := range f.Spec.Rings {
		sel, err := metav1.LabelSelectorAsSelector(&r.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(ls)) {
			return r.Name
		}
	}
	return ls[fleetfile.RingLabel]
}

// ContextTargets returns one target per kubeconfig context, named after
// it, in no ring.
func ContextTargets(contexts []string) []Target {
	out := make([]Target, 0, len(contexts))
	for _, c := range contexts {
		out = append(out, Target{Name: c, Context: c})
	}
	return out
}
