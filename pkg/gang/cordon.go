package gang

import "context"

// Cordon is Run's first step on its own: it chooses the run to resume (or
// a new one) as Run does, records it on the nodes and cordons them, noting
// whether each was cordoned before, and drains nothing. A caller that
// paces the drains itself (pkg/inference drains an inference pool wave by
// wave) cordons the whole set first, so that no displaced pod lands on a
// node drained later, then calls Run on one part at a time with
// Options.RunID set to the id returned here. With Options.DryRun it only
// chooses the run.
func (d *Drainer) Cordon(ctx context.Context, nodes []string) (runID string, resumed bool, err error) {
	recs, err := d.readNodes(ctx, nodes)
	if err != nil {
		return "", false, err
	}
	runID, resumed, err = d.chooseRun(recs)
	if err != nil {
		return "", false, err
	}
	d.records, d.runID = recs, runID
	if d.Options.DryRun {
		return runID, resumed, nil
	}
	for _, n := range nodes {
		if err := d.cordon(ctx, n); err != nil {
			return runID, resumed, incomplete(err)
		}
	}
	return runID, resumed, nil
}
