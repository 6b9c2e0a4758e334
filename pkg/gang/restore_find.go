package gang

// Finding the gangs of a run by their stop records: a provider that
// replaces a pool's nodes deletes the nodes that recorded the run, and with
// them restore's list of the run's gangs. Every stop object (the gang's
// root, else its Kueue Workload) carries the run and the gang's record, so
// restore lists the kinds gang-drain stops, cluster-wide, and picks the
// objects of the runs it restores.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type runGang struct {
	GangRecord
	run string
}

// stopKinds are the group/resources whose objects can hold a stop record:
// the root kinds discovery knows, and Kueue Workloads.
func stopKinds() []schema.GroupResource {
	out := []schema.GroupResource{{Group: "kueue.x-k8s.io", Resource: workloadsResourceName}}
	for gk, k := range knownKinds {
		if k.gang != "" {
			out = append(out, schema.GroupResource{Group: gk.Group, Resource: k.resource})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// stoppedGangs lists the stop objects of runs, at each group's preferred
// version; a group the cluster does not serve is skipped, and a list the
// role refuses is a warning (restore carries on with the nodes' records).
func (d *Drainer) stoppedGangs(ctx context.Context, runs map[string]bool) ([]runGang, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	var groups *metav1.APIGroupList
	err := d.retry(ctx, func() (err error) {
		groups, err = d.Kube.Discovery().ServerGroups()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("discovering API groups: %w", err)
	}
	preferred := map[string]string{}
	for _, g := range groups.Groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	var out []runGang
	for _, gr := range stopKinds() {
		v, ok := preferred[gr.Group]
		if !ok {
			continue
		}
		gvr := gr.WithVersion(v)
		var items []metav1.Object
		err := d.retry(ctx, func() error {
			l, err := d.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			items = items[:0]
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
			return nil
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if apierrors.IsForbidden(err) {
			d.emit(Event{Type: EventWarning, Message: fmt.Sprintf("cannot list %s (%v): gangs of replaced nodes that it holds are not restored", gr, err)})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", gr, err)
		}
		for _, o := range items {
			a := o.GetAnnotations()
			run := a[AnnStoppedByRun]
			if !runs[run] {
				continue
			}
			var rec GangRecord
			if err := json.Unmarshal([]byte(a[AnnGangRecord]), &rec); err != nil || rec.Key == "" {
				d.emit(Event{Type: EventWarning, Message: fmt.Sprintf("%s %s/%s was stopped by run %s but holds no gang record (an older gang-drain wrote it): restore it by hand", gr, o.GetNamespace(), o.GetName(), run)})
				continue
			}
			out = append(out, runGang{GangRecord: rec, run: run})
		}
	}
	return out, nil
}
