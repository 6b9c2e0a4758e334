package inference

// Surging a model Deployment before the drain and undoing exactly that
// afterwards. The record lives on the Deployment itself and changes in the
// same patch as spec.replicas, guarded by the resourceVersion read, so a
// surge is recorded exactly when it is applied and is undone once.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

// Records of an inference run, beside pkg/gang's records of the same run.
const (
	// LabelSurgedByRun on a Deployment names the run whose surge it
	// carries (a label, so that restore lists them with one request).
	LabelSurgedByRun = gang.StatePrefix + "surged-by-run"
	// AnnSurge holds the SurgeRecord (JSON).
	AnnSurge = gang.StatePrefix + "surge"
	// AnnSurgeUndone records the run and time a surge was undone.
	AnnSurgeUndone = gang.StatePrefix + "surge-undone"
	// AnnInferenceRun on a node names the inference run that cordoned it,
	// so that restore knows to undo that run's surges too.
	AnnInferenceRun = gang.StatePrefix + "inference-run"
	// AnnInferenceModels on a node lists the models (namespace/name,
	// comma-separated) that had replicas on it when the run began, so that
	// a resumed run still waits for the replicas a drained node displaced.
	AnnInferenceModels = gang.StatePrefix + "inference-models"
)

// SurgeOutcome is what a run or restore did with one surged Deployment.
type SurgeOutcome struct {
	Deployment string `json:"deployment"`
	Run        string `json:"run"`
	Surge      int32  `json:"surge"`
	// ReplicasBefore and ReplicasSet are the record's; ReplicasNow is
	// spec.replicas when undone and ReplicasAfter what it became.
	ReplicasBefore int32 `json:"replicasBefore"`
	ReplicasSet    int32 `json:"replicasSet"`
	ReplicasNow    int32 `json:"replicasNow"`
	ReplicasAfter  int32 `json:"replicasAfter"`
	// Action is surged, scaled-back or (dry run) would-scale-back.
	Action  string `json:"action"`
	Message string `json:"message,omitempty"`
}

// Surge outcome actions.
const (
	ActionSurged         = "surged"
	ActionScaledBack     = "scaled-back"
	ActionWouldScaleBack = "would-scale-back"
)

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// ApplySurge scales d up by surge for run, recording what it did in the
// same patch. A Deployment that already carries run's surge is left as it
// is (a resumed run); one changed since it was read is read again.
func ApplySurge(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment, run string, surge int32, now time.Time) (SurgeOutcome, error) {
	for attempt := 0; ; attempt++ {
		if rec, ok := ReadSurgeRecord(d); ok {
			if rec.Run == run {
				return SurgeOutcome{Deployment: d.Namespace + "/" + d.Name, Run: run, Surge: rec.Surge, ReplicasBefore: rec.ReplicasBefore, ReplicasSet: rec.ReplicasSet,
					ReplicasNow: replicasOf(d), ReplicasAfter: replicasOf(d), Action: ActionSurged, Message: "surged earlier by this run"}, nil
			}
			return SurgeOutcome{}, fmt.Errorf("deployment %s/%s carries the surge of run %s: undo it first with `kubectl gang-drain restore %s --inference`", d.Namespace, d.Name, rec.Run, rec.Run)
		}
		before := replicasOf(d)
		rec := SurgeRecord{Run: run, ReplicasBefore: before, ReplicasSet: before + surge, Surge: surge, At: now.UTC().Format(time.RFC3339)}
		recJSON, _ := json.Marshal(rec)
		body, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{
				"resourceVersion": d.ResourceVersion,
				"labels":          map[string]any{LabelSurgedByRun: run},
				"annotations":     map[string]any{AnnSurge: string(recJSON), AnnSurgeUndone: nil},
			},
			"spec": map[string]any{"replicas": rec.ReplicasSet},
		})
		_, err := c.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, body, metav1.PatchOptions{})
		if err == nil {
			return SurgeOutcome{Deployment: d.Namespace + "/" + d.Name, Run: run, Surge: surge, ReplicasBefore: before, ReplicasSet: rec.ReplicasSet,
				ReplicasNow: before, ReplicasAfter: rec.ReplicasSet, Action: ActionSurged}, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return SurgeOutcome{}, fmt.Errorf("surging deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		if d, err = c.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{}); err != nil {
			return SurgeOutcome{}, fmt.Errorf("reading deployment: %w", err)
		}
	}
}

// UndoSurge removes the surge recorded on d: spec.replicas loses the
// surge the run added, and the record goes in the same patch, so that a
// second call finds nothing to undo. Where someone lowered the replicas
// since (a person, or GitOps putting back the count it owns), it never
// goes below the smaller of the replicas now and those before the surge:
// a scale-down does not go through a PodDisruptionBudget, so taking the
// whole surge off a lowered count could take the model to zero.
func UndoSurge(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment, dryRun bool, now time.Time) (SurgeOutcome, bool, error) {
	for attempt := 0; ; attempt++ {
		rec, ok := ReadSurgeRecord(d)
		if !ok {
			return SurgeOutcome{}, false, nil
		}
		cur := replicasOf(d)
		o := SurgeOutcome{Deployment: d.Namespace + "/" + d.Name, Run: rec.Run, Surge: rec.Surge, ReplicasBefore: rec.ReplicasBefore, ReplicasSet: rec.ReplicasSet,
			ReplicasNow: cur, ReplicasAfter: max(cur-rec.Surge, min(cur, rec.ReplicasBefore), 0)}
		switch {
		case cur < rec.ReplicasSet:
			o.Message = fmt.Sprintf("replicas lowered since the surge (set %d, now %d): scaled to %d, not below the %d it had before the surge or the %d now", rec.ReplicasSet, cur, o.ReplicasAfter, rec.ReplicasBefore, cur)
		case cur != rec.ReplicasSet:
			o.Message = fmt.Sprintf("replicas changed since the surge (set %d, now %d): only the surge of %d is removed", rec.ReplicasSet, cur, rec.Surge)
		}
		if dryRun {
			o.Action = ActionWouldScaleBack
			return o, true, nil
		}
		body, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{
				"resourceVersion": d.ResourceVersion,
				"labels":          map[string]any{LabelSurgedByRun: nil},
				"annotations":     map[string]any{AnnSurge: nil, AnnSurgeUndone: fmt.Sprintf("%s at %s (%d -> %d)", rec.Run, now.UTC().Format(time.RFC3339), cur, o.ReplicasAfter)},
			},
			"spec": map[string]any{"replicas": o.ReplicasAfter},
		})
		_, err := c.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, body, metav1.PatchOptions{})
		if err == nil {
			o.Action = ActionScaledBack
			return o, true, nil
		}
		if apierrors.IsNotFound(err) {
			return SurgeOutcome{}, false, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return o, false, fmt.Errorf("scaling deployment %s/%s back: %w", d.Namespace, d.Name, err)
		}
		if d, err = c.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return SurgeOutcome{}, false, nil
			}
			return o, false, fmt.Errorf("reading deployment: %w", err)
		}
	}
}

// SurgedDeployments lists the Deployments that carry the surge of one of
// runs, in any namespace, with one request.
func SurgedDeployments(ctx context.Context, c kubernetes.Interface, runs []string) ([]appsv1.Deployment, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	sel := fmt.Sprintf("%s in (%s)", LabelSurgedByRun, strings.Join(runs, ","))
	list, err := c.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the deployments surged by run %s: %w", strings.Join(runs, ", "), err)
	}
	out := list.Items
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

// UndoRuns scales back every Deployment surged by one of runs.
func UndoRuns(ctx context.Context, c kubernetes.Interface, runs []string, dryRun bool, now time.Time) ([]SurgeOutcome, error) {
	ds, err := SurgedDeployments(ctx, c, runs)
	if err != nil {
		return nil, err
	}
	var out []SurgeOutcome
	for i := range ds {
		o, did, err := UndoSurge(ctx, c, &ds[i], dryRun, now)
		if err != nil {
			return out, err
		}
		if did {
			out = append(out, o)
		}
	}
	return out, nil
}
