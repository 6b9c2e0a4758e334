package gang

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Status reads every run recorded on the cluster's nodes (or only runID's)
// with the current state of the gangs each stopped.
func (d *Drainer) Status(ctx context.Context, runID string) ([]RunSummary, error) {
	list, err := d.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	byRun := map[string]*RunSummary{}
	for i := range list.Items {
		r := ReadNodeRecord(&list.Items[i], d.GPUResources)
		if r.RunID == "" || runID != "" && r.RunID != runID {
			continue
		}
		s := byRun[r.RunID]
		if s == nil {
			s = &RunSummary{RunID: r.RunID, Requester: r.Requester, StartedAt: r.StartedAt}
			byRun[r.RunID] = s
		}
		if !r.StartedAt.IsZero() && (s.StartedAt.IsZero() || r.StartedAt.Before(s.StartedAt)) {
			s.StartedAt = r.StartedAt
		}
		s.Nodes = append(s.Nodes, r)
	}
	var out []RunSummary
	keys := d.keys()
	for _, id := range sortedKeys(byRun) {
		s := byRun[id]
		sortRecords(s.Nodes)
		s.Phase = RunPhase(s.Nodes)
		seen := map[string]bool{}
		for _, n := range s.Nodes {
			for _, g := range n.Gangs {
				if seen[g.Key] {
					continue
				}
				seen[g.Key] = true
				gs := GangStatus{GangRecord: g}
				ref := g.Root
				if ref == nil {
					ref = g.Workload
				}
				if ref != nil && d.Dynamic != nil {
					u, err := d.Dynamic.Resource(ref.GVR()).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
					switch {
					case apierrors.IsNotFound(err):
						gs.Message = "deleted"
					case err != nil:
						gs.Message = err.Error()
					default:
						a := u.GetAnnotations()
						gs.StoppedByRun, gs.StopState, gs.StoppedAt = a[AnnStoppedByRun], a[AnnStopState], a[AnnStoppedAt]
						gs.Restored = a[AnnRestoredBy] == id
						resp := keys.ParseResponse(a)
						gs.CheckpointStatus, gs.CheckpointStep, gs.CheckpointURI = string(resp.Status), resp.Step, resp.URI
						if rec, err := ParseDeletedPods(a[AnnDeletedPods]); err != nil {
							gs.Message = err.Error()
						} else if rec != nil && rec.Run == id {
							gs.DeletedPods = rec
						}
					}
				}
				s.Gangs = append(s.Gangs, gs)
			}
		}
		sort.Slice(s.Gangs, func(i, j int) bool { return s.Gangs[i].Key < s.Gangs[j].Key })
		out = append(out, *s)
	}
	return out, nil
}
