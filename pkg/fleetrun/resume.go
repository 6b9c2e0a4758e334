package fleetrun

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"

	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// WorkflowGVR is Argo's Workflow resource.
var WorkflowGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

// SuspendSelector chooses suspend nodes of a run's Workflow to release.
type SuspendSelector struct {
	// Kind is SuspendApproval, SuspendHold or SuspendWait.
	Kind string
	// Ring and Cluster narrow the nodes ("" matches any).
	Ring, Cluster string
}

func (s SuspendSelector) matches(in map[string]string) bool {
	if in["kind"] != s.Kind {
		return false
	}
	if s.Ring != "" && in["ring"] != s.Ring {
		return false
	}
	if s.Cluster != "" && in["cluster"] != s.Cluster {
		return false
	}
	return true
}

// Resumed is one node released.
type Resumed struct {
	Node    string `json:"node"`
	Kind    string `json:"kind"`
	Ring    string `json:"ring,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	Step    string `json:"step,omitempty"`
	// OpensAt is when a timed wait (kind wait) ends by itself: its node's
	// start plus its seconds (status only).
	OpensAt *time.Time `json:"opensAt,omitempty"`
}

// opensAt is when the workflow-controller ends a running timed suspend:
// the node's startedAt plus its duration, read as whole seconds or else a
// Go duration (executeSuspend in workflow/controller/operator.go and
// ParseStringToDuration in pkg/apis/workflow/v1alpha1/utils.go,
// argo-workflows v3.7.15). The wait template's duration is its input
// "seconds" (waitTemplate).
func opensAt(n map[string]any, seconds string) *time.Time {
	started, _, _ := unstructured.NestedString(n, "startedAt")
	at, err := time.Parse(time.RFC3339, started)
	if err != nil {
		return nil
	}
	var d time.Duration
	if v, err := strconv.Atoi(seconds); err == nil {
		d = time.Duration(v) * time.Second
	} else if d, err = time.ParseDuration(seconds); err != nil {
		return nil
	}
	at = at.Add(d).UTC()
	return &at
}

// ResumeWorkflow releases the active suspend nodes of a Workflow that the
// selectors match, as `argo resume --node-field-selector` does (Argo's
// workflow/util.ResumeWorkflow marks an active suspend node Succeeded with
// a message and its finish time; the controller then moves on). Node
// status that Argo compressed into status.compressedNodes is read and
// written back the same way; status offloaded to a database is not
// reachable from here.
func ResumeWorkflow(ctx context.Context, dyn dynamic.Interface, namespace, name, message string, now time.Time, sel ...SuspendSelector) ([]Resumed, error) {
	var out []Resumed
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		out = nil
		wf, err := dyn.Resource(WorkflowGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v, _, _ := unstructured.NestedString(wf.Object, "status", "offloadNodeStatusVersion"); v != "" {
			return fmt.Errorf("workflow %s/%s keeps its node status in Argo's database: release it with `argo resume %s -n %s`", namespace, name, name, namespace)
		}
		nodes, compressed, err := workflowNodes(wf)
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(nodes))
		for id := range nodes {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			n, _ := nodes[id].(map[string]any)
			if n == nil || n["type"] != "Suspend" || n["phase"] != "Running" {
				continue
			}
			in := nodeInputs(n)
			for _, s := range sel {
				if !s.matches(in) {
					continue
				}
				n["phase"] = "Succeeded"
				n["finishedAt"] = now.UTC().Format(time.RFC3339)
				n["message"] = message
				out = append(out, Resumed{Node: fmt.Sprint(n["name"]), Kind: in["kind"], Ring: in["ring"], Cluster: in["cluster"], Step: in["step"]})
				break
			}
		}
		if len(out) == 0 {
			return nil
		}
		if compressed {
			b, err := json.Marshal(nodes)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(b)
			_ = zw.Close()
			if err := unstructured.SetNestedField(wf.Object, base64.StdEncoding.EncodeToString(buf.Bytes()), "status", "compressedNodes"); err != nil {
				return err
			}
		} else if err := unstructured.SetNestedField(wf.Object, nodes, "status", "nodes"); err != nil {
			return err
		}
		_, err = dyn.Resource(WorkflowGVR).Namespace(namespace).Update(ctx, wf, metav1.UpdateOptions{FieldManager: "kubectl-skew-fleet"})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no workflow %s in namespace %s: %w", name, namespace, err)
	}
	return out, err
}

// workflowNodes returns status.nodes, decompressing status.compressedNodes
// (base64 of gzip of the JSON map) when Argo compressed them.
func workflowNodes(wf *unstructured.Unstructured) (map[string]any, bool, error) {
	if c, ok, _ := unstructured.NestedString(wf.Object, "status", "compressedNodes"); ok && c != "" {
		raw, err := base64.StdEncoding.DecodeString(c)
		if err != nil {
			return nil, true, fmt.Errorf("status.compressedNodes: %w", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, true, fmt.Errorf("status.compressedNodes: %w", err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, true, fmt.Errorf("status.compressedNodes: %w", err)
		}
		var nodes map[string]any
		if err := json.Unmarshal(b, &nodes); err != nil {
			return nil, true, fmt.Errorf("status.compressedNodes: %w", err)
		}
		return nodes, true, nil
	}
	nodes, _, err := unstructured.NestedMap(wf.Object, "status", "nodes")
	return nodes, false, err
}

func nodeInputs(n map[string]any) map[string]string {
	out := map[string]string{}
	ps, _, _ := unstructured.NestedSlice(n, "inputs", "parameters")
	for _, p := range ps {
		m, _ := p.(map[string]any)
		if m == nil {
			continue
		}
		name, _ := m["name"].(string)
		val, _ := m["value"].(string)
		out[name] = val
	}
	return out
}

// WorkflowPhase reads a Workflow's phase and its active suspend nodes, for
// status.
func WorkflowPhase(ctx context.Context, dyn dynamic.Interface, namespace, name string) (phase string, waiting []Resumed, err error) {
	wf, err := dyn.Resource(WorkflowGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	phase, _, _ = unstructured.NestedString(wf.Object, "status", "phase")
	nodes, _, err := workflowNodes(wf)
	if err != nil {
		return phase, nil, err
	}
	for _, v := range nodes {
		n, _ := v.(map[string]any)
		if n == nil || n["type"] != "Suspend" || n["phase"] != "Running" {
			continue
		}
		in := nodeInputs(n)
		r := Resumed{Node: fmt.Sprint(n["name"]), Kind: in["kind"], Ring: in["ring"], Cluster: in["cluster"], Step: in["step"]}
		if r.Kind == SuspendWait {
			r.OpensAt = opensAt(n, in["seconds"])
		}
		waiting = append(waiting, r)
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].Node < waiting[j].Node })
	return phase, waiting, nil
}

// RunWorkflows lists the run's Workflows other than the one render
// named (WorkflowName): those labelled with the run's fleet and run. They
// are each cluster's Workflow, when the run was rendered with a Workflow
// per cluster (they carry a cluster label too), and every copy of the
// run's Workflow that `argo resubmit` created: a resubmitted Workflow is
// named from generateName "<name>-" and keeps every label of the one it
// copies but the creator, phase, completed and archiving ones
// (workflow/util.FormulateResubmitWorkflow, argoproj/argo-workflows
// v3.7.15). Oldest first.
func RunWorkflows(ctx context.Context, dyn dynamic.Interface, namespace, fleet, run string) ([]unstructured.Unstructured, error) {
	g := fleetfile.Group
	sel := fmt.Sprintf("%s/fleet=%s,%s/run=%s", g, fleet, g, run)
	l, err := dyn.Resource(WorkflowGVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	for _, w := range l.Items {
		if w.GetName() != WorkflowName(fleet, run) {
			out = append(out, w)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].GetCreationTimestamp(), out[j].GetCreationTimestamp()
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return out[i].GetName() < out[j].GetName()
	})
	return out, nil
}

// resubmitted reports whether w is a copy of the run's own Workflow (argo
// resubmit), not a cluster's Workflow.
func resubmitted(w unstructured.Unstructured) bool {
	_, cluster := w.GetLabels()[fleetfile.Group+"/cluster"]
	return !cluster
}

// ResumeRun releases the matching suspend nodes of the run's Workflow,
// of each cluster's Workflow it created and of each resubmitted copy
// (RunWorkflows): with a Workflow per cluster a cluster's holds are nodes
// of its own Workflow, and a resubmitted run waits in its copy. It is
// NotFound when the run has no Workflow at all.
func ResumeRun(ctx context.Context, dyn dynamic.Interface, namespace, fleet, run, message string, now time.Time, sel ...SuspendSelector) ([]Resumed, error) {
	out, err := ResumeWorkflow(ctx, dyn, namespace, WorkflowName(fleet, run), message, now, sel...)
	parentMissing := apierrors.IsNotFound(err)
	if err != nil && !parentMissing {
		return out, err
	}
	children, lerr := RunWorkflows(ctx, dyn, namespace, fleet, run)
	if lerr != nil {
		if parentMissing {
			return nil, err
		}
		return out, lerr
	}
	if parentMissing && len(children) == 0 {
		return nil, err
	}
	for _, w := range children {
		c := w.GetName()
		r, err := ResumeWorkflow(ctx, dyn, namespace, c, message, now, sel...)
		if err != nil && !apierrors.IsNotFound(err) {
			return out, err
		}
		for i := range r {
			r[i].Node = c + "/" + r[i].Node
		}
		out = append(out, r...)
	}
	return out, nil
}

// RunPhase is the run's Workflow's phase and the suspend nodes waiting in
// it, in each cluster's Workflow it created and in each resubmitted copy;
// once the run was resubmitted, the phase is its newest copy's.
func RunPhase(ctx context.Context, dyn dynamic.Interface, namespace, fleet, run string) (string, []Resumed, error) {
	phase, waiting, err := WorkflowPhase(ctx, dyn, namespace, WorkflowName(fleet, run))
	if err != nil {
		return phase, waiting, err
	}
	children, err := RunWorkflows(ctx, dyn, namespace, fleet, run)
	if err != nil {
		return phase, waiting, err
	}
	for _, cw := range children {
		c := cw.GetName()
		p, w, err := WorkflowPhase(ctx, dyn, namespace, c)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return phase, waiting, err
		}
		if resubmitted(cw) {
			phase = p
		}
		for i := range w {
			w[i].Node = c + "/" + w[i].Node
		}
		waiting = append(waiting, w...)
	}
	return phase, waiting, nil
}
