package fleetrun

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// KindRunEnd is the record of one engine Workflow's end.
const KindRunEnd = "FleetRunEnd"

// WorkflowEndPhases are the values Argo gives {{workflow.status}} in an
// exit handler (docs/variables.md, "Exit Handler" variables, at
// argo-workflows v3.7.15: Succeeded, Failed or Error).
var WorkflowEndPhases = []string{"Succeeded", "Failed", "Error"}

// RunEnd is how one Workflow of a run ended, recorded by its exit handler
// (`kubectl skew fleet end`, the onExit of the rendered Workflow). A run
// resubmitted after an end has one record per Workflow, never overwritten.
type RunEnd struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Run        string    `json:"run"`
	Workflow   string    `json:"workflow"`
	Phase      string    `json:"phase"`
	At         time.Time `json:"at"`
	Key        string    `json:"key"`
}

// RecordEnd writes how workflow ended as a new record of the run.
func (p *Programme) RecordEnd(ctx context.Context, workflow, phase string) (RunEnd, error) {
	if !slices.Contains(WorkflowEndPhases, phase) {
		return RunEnd{}, cli.Usagef("--phase %q: want one of %v, as Argo's {{workflow.status}} gives it", phase, WorkflowEndPhases)
	}
	if workflow == "" {
		return RunEnd{}, cli.Usagef("--workflow is required: the Workflow's name ({{workflow.name}} in its exit handler)")
	}
	e := RunEnd{APIVersion: APIVersion, Kind: KindRunEnd, Run: p.Plan.Run, Workflow: workflow, Phase: phase, At: p.now().UTC()}
	e.Key = runKey(e.Run, "ends", e.At.Format("20060102T150405.000000000Z")+"-"+stepName(workflow)+".json")
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return e, err
	}
	if err := p.Store.Create(ctx, e.Key, append(b, '\n')); err != nil {
		return e, cli.ClusterErr(fmt.Errorf("recording the end of %s in %s: %w", workflow, p.Store.URL(), err))
	}
	return e, nil
}

// ReadEnds reads a run's Workflow ends, oldest first.
func ReadEnds(ctx context.Context, st Store, run string) ([]RunEnd, error) {
	out, err := readRecords(ctx, st, runKey(run, "ends")+"/", "workflow end", func(e *RunEnd, k string) { e.Key = k })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b RunEnd) int { return a.At.Compare(b.At) })
	return out, nil
}
