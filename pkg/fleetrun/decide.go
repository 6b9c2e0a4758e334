package fleetrun

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// DecideOptions tune Decide.
type DecideOptions struct {
	// Resume releases the Workflow's suspend nodes the approval unblocks.
	Resume bool
	// Namespace of the Workflow (default: the file's engine namespace).
	Namespace string
}

// DecideResult is what a decision did.
type DecideResult struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Decision   Decision `json:"decision"`
	// Approvals says where the ring's approvals stand.
	Approvals string    `json:"approvals,omitempty"`
	Resumed   []Resumed `json:"resumed,omitempty"`
	// WorkflowNote says why the Workflow was not resumed.
	WorkflowNote string `json:"workflowNote,omitempty"`
}

// Decide records a person's approval, halt or skip under their identity
// (d.Identity; By becomes its user name) and, for an approval, releases what
// it unblocks in the run's Workflow: the ring's approval suspend once the
// ring has its approvers, and the steps held in its scope.
func (p *Programme) Decide(ctx context.Context, d Decision, opts DecideOptions) (*DecideResult, error) {
	if d.Ring != "" {
		if _, ok := p.Plan.Ring(d.Ring); !ok {
			return nil, cli.Usagef("ring %s is not in run %s", d.Ring, p.Plan.Run)
		}
	}
	if d.Cluster != "" {
		c, ok := p.Plan.Cluster(d.Cluster)
		if !ok {
			return nil, cli.Usagef("cluster %s is not in run %s (clusters: %s)", d.Cluster, p.Plan.Run, strings.Join(p.clusterNames(), ", "))
		}
		if d.Ring != "" && d.Ring != c.Ring {
			return nil, cli.Usagef("cluster %s is in ring %s, not %s", d.Cluster, c.Ring, d.Ring)
		}
		d.Ring = c.Ring
		if d.Step != "" {
			if _, _, ok := c.Step(d.Step); !ok {
				return nil, cli.Usagef("cluster %s has no step %s", d.Cluster, d.Step)
			}
		}
	}
	if d.Decision == DecisionHalt && d.Step != "" {
		return nil, cli.Usagef("a halt covers a run, a ring or a cluster, not a step")
	}
	if d.Decision == DecisionSkip && (d.Cluster == "" || d.Step != "") {
		return nil, cli.Usagef("skip takes one cluster out of the run: --cluster CLUSTER")
	}
	if d.Identity == nil || d.Identity.User == "" {
		return nil, cli.Usagef("a decision needs the identity of who makes it (the user the management cluster authenticates)")
	}
	d.By = d.Identity.User
	rec, err := RecordDecision(ctx, p.Store, d)
	if err != nil {
		return nil, cli.ClusterErr(fmt.Errorf("recording the decision in %s: %w", p.Store.URL(), err))
	}
	res := &DecideResult{APIVersion: APIVersion, Kind: "FleetDecisionResult", Decision: rec}
	if d.Decision == DecisionHalt {
		return res, nil
	}
	ds, err := ReadDecisions(ctx, p.Store, p.Plan.Run)
	if err != nil {
		return nil, cli.ClusterErr(err)
	}
	var sel []SuspendSelector
	switch {
	case d.Decision == DecisionSkip:
		who, ok := p.Plan.Skipped(ds, d.Cluster)
		res.Approvals = fmt.Sprintf("skip of cluster %s: %d of %d people (%s)", d.Cluster, len(who), p.Plan.Lifters(d.Ring), strings.Join(who, ", "))
		if !ok {
			res.Approvals += ": it stays in the run until more agree"
			return res, nil
		}
		res.Approvals += ": it leaves the run now; the gates count it as decided and its remaining steps do nothing"
		// Its hold and its timed wait both: a step waiting for its
		// cluster's window or a freeze would otherwise sleep until the
		// opening (days, for a freeze) and keep its place in the ring.
		// Released, the step runs once more, sees the skip and ends.
		sel = append(sel, SuspendSelector{Kind: SuspendHold, Ring: d.Ring, Cluster: d.Cluster},
			SuspendSelector{Kind: SuspendWait, Ring: d.Ring, Cluster: d.Cluster})
	case d.Step != "":
		// A manual step is retried by the engine; nothing is suspended.
	case d.Cluster != "":
		sel = append(sel, SuspendSelector{Kind: SuspendHold, Ring: d.Ring, Cluster: d.Cluster})
	case d.Ring != "":
		r, _ := p.Plan.Ring(d.Ring)
		sel = append(sel, SuspendSelector{Kind: SuspendHold, Ring: d.Ring})
		if r.Approvers > 0 {
			who := Approvers(ds, d.Ring)
			res.Approvals = fmt.Sprintf("ring %s: %d of %d approvals (%s)", d.Ring, len(who), r.Approvers, strings.Join(who, ", "))
			if len(who) >= r.Approvers {
				sel = append(sel, SuspendSelector{Kind: SuspendApproval, Ring: d.Ring})
			} else {
				res.Approvals += ": the ring waits for more"
			}
		}
	default:
		sel = append(sel, SuspendSelector{Kind: SuspendHold})
	}
	if h, ok := lastHalt(ds, d); ok {
		if _, holds := p.Plan.ActiveHalt(ds, orRing(h.Ring, d.Ring), h.Cluster); holds {
			res.Approvals = strings.TrimPrefix(res.Approvals+"; ", "; ") + fmt.Sprintf("the halt of %s holds: %d of %d distinct approvers since it", h.Scope(), len(liftersOf(ds, h)), p.Plan.Lifters(h.Ring))
		}
	}
	if !opts.Resume || len(sel) == 0 {
		return res, nil
	}
	dyn, err := p.Access.Getter.Dynamic()
	if err != nil {
		res.WorkflowNote = "decision recorded; the Workflow was not resumed: " + err.Error()
		return res, nil
	}
	ns := opts.Namespace
	if ns == "" {
		ns = argoSettings(p.Plan.Spec).Namespace
	}
	msg := fmt.Sprintf("%s by %s: %s", d.Decision, rec.By, rec.Reason)
	res.Resumed, err = ResumeRun(ctx, dyn, ns, p.Plan.Fleet, p.Plan.Run, msg, rec.At, sel...)
	switch {
	case apierrors.IsNotFound(err):
		// No Argo here (or not this run's Workflow): a run by hand.
		res.WorkflowNote = fmt.Sprintf("no Argo Workflow %s/%s: nothing to resume; a run by hand goes on with its next kubectl skew fleet step", ns, WorkflowName(p.Plan.Fleet, p.Plan.Run))
	case err != nil:
		res.WorkflowNote = "decision recorded; the Workflow was not resumed: " + err.Error()
	}
	return res, nil
}

// lastHalt is the latest halt an approval of d's scope would lift.
func lastHalt(ds []Decision, d Decision) (Decision, bool) {
	if d.Decision != DecisionApprove || d.Step != "" {
		return Decision{}, false
	}
	for i := len(ds) - 1; i >= 0; i-- {
		h := ds[i]
		if h.Decision != DecisionHalt || h.Step != "" {
			continue
		}
		switch {
		case d.Cluster != "" && h.Cluster == d.Cluster,
			d.Cluster == "" && d.Ring != "" && h.Ring == d.Ring,
			d.Cluster == "" && d.Ring == "":
			return h, true
		}
	}
	return Decision{}, false
}

// Workflow reads the run's Workflow for status; an error is kept in it.
// It is nil when the cluster serves no Workflows or has none of this run:
// a run by hand.
func (p *Programme) Workflow(ctx context.Context, namespace string) *WorkflowView {
	if namespace == "" {
		namespace = argoSettings(p.Plan.Spec).Namespace
	}
	v := &WorkflowView{Namespace: namespace, Name: WorkflowName(p.Plan.Fleet, p.Plan.Run)}
	dyn, err := p.Access.Getter.Dynamic()
	if err == nil {
		v.Phase, v.Waiting, err = RunPhase(ctx, dyn, namespace, p.Plan.Fleet, p.Plan.Run)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		v.Error = oneLine(err.Error(), 160)
	}
	return v
}

// RecordRingGate keeps a ring gate's report as evidence of the run (never
// overwritten: each evaluation has its own key).
func (p *Programme) RecordRingGate(ctx context.Context, g *GateReport) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	key := path.Join(runKey(p.Plan.Run, "gates", g.Ring), g.At.Format("20060102T150405.000000000Z")+".json")
	return PutEvidence(ctx, p.Store, key, append(b, '\n'))
}
