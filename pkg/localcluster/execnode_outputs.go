//go:build linux

package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// What Argo's wait container does for a pod's output parameters, at
// argo-workflows v3.7.15: it reads each parameter's valueFrom.path from
// the main container (its default when the file is missing:
// WorkflowExecutor.SaveParameters in workflow/executor/executor.go) and
// reports them in a WorkflowTaskResult named for the node
// (createTaskResult in workflow/executor/taskresult.go: labels
// workflows.argoproj.io/workflow and
// workflows.argoproj.io/report-outputs-completed, owned by the Workflow),
// which the controller copies into the node's outputs
// (taskResultReconciliation, workflow/controller/taskresult.go). The
// template comes to the pod's init container as ARGO_TEMPLATE
// (workflow/controller/workflowpod.go); the node id is the pod's
// workflows.argoproj.io/node-id annotation.
const (
	argoEnvTemplate     = "ARGO_TEMPLATE"
	argoLabelWorkflow   = "workflows.argoproj.io/workflow"
	argoLabelCompleted  = "workflows.argoproj.io/report-outputs-completed"
	argoAnnotationNode  = "workflows.argoproj.io/node-id"
	argoWorkflowKind    = "Workflow"
	argoAPIVersion      = "argoproj.io/v1alpha1"
	argoTaskResultsName = "workflowtaskresults"
)

// outputParam is an output parameter read from a file (Parameter.ValueFrom
// path and default in pkg/apis/workflow/v1alpha1/workflow_types.go).
type outputParam struct {
	Name      string `json:"name"`
	ValueFrom *struct {
		Path    string  `json:"path"`
		Default *string `json:"default"`
	} `json:"valueFrom"`
}

// podOutputs are the pod's output parameters read from a path, and where
// each one's file is for this pod: a pod on this node has no filesystem of
// its own, so a path its template names becomes a file under the node's
// Dir, and the command's arguments that name the path name that file.
type podOutputs struct {
	params []outputParam
	files  map[string]string // path in the pod -> file on this machine
}

func templateOutputs(p *corev1.Pod, dir string) (*podOutputs, error) {
	var raw string
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		for _, e := range c.Env {
			if e.Name == argoEnvTemplate && raw == "" {
				raw = e.Value
			}
		}
	}
	out := &podOutputs{files: map[string]string{}}
	if raw == "" {
		return out, nil
	}
	var tmpl struct {
		Outputs struct {
			Parameters []outputParam `json:"parameters"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(raw), &tmpl); err != nil {
		return nil, fmt.Errorf("pod %s: %s: %w", p.Name, argoEnvTemplate, err)
	}
	for _, op := range tmpl.Outputs.Parameters {
		if op.ValueFrom == nil || op.ValueFrom.Path == "" {
			continue
		}
		out.params = append(out.params, op)
		out.files[op.ValueFrom.Path] = filepath.Join(dir, p.Name+".outputs", strings.ReplaceAll(strings.TrimPrefix(op.ValueFrom.Path, "/"), "/", "_"))
	}
	if len(out.files) > 0 {
		if err := os.MkdirAll(filepath.Join(dir, p.Name+".outputs"), 0o700); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// argv names each output path's file for this pod where the command names
// the path (as an argument, or as --flag=PATH).
func (o *podOutputs) argv(argv []string) []string {
	out := append([]string{}, argv...)
	for i, a := range out {
		for path, file := range o.files {
			switch {
			case a == path:
				out[i] = file
			case strings.HasSuffix(a, "="+path):
				out[i] = strings.TrimSuffix(a, path) + file
			}
		}
	}
	return out
}

// values are the parameters as the wait container reports them: the
// file's content with one trailing newline trimmed (SaveParameters,
// strings.TrimSuffix(output, "\n"), executor.go line 606 at v3.7.15),
// else the default; a parameter with neither is left out (Argo errors the
// node; the command's exit code says why here).
func (o *podOutputs) values() []map[string]any {
	var out []map[string]any
	for _, op := range o.params {
		b, err := os.ReadFile(o.files[op.ValueFrom.Path])
		switch {
		case err == nil:
			out = append(out, map[string]any{"name": op.Name, "value": strings.TrimSuffix(string(b), "\n")})
		case op.ValueFrom.Default != nil:
			out = append(out, map[string]any{"name": op.Name, "value": *op.ValueFrom.Default})
		}
	}
	return out
}

// taskResults is the WorkflowTaskResult resource of the pod's namespace.
func (n *ExecNode) taskResults(p *corev1.Pod) (dynamic.ResourceInterface, error) {
	dc := n.dyn
	if dc == nil {
		var err error
		if dc, err = dynamic.NewForConfig(n.cp.Config); err != nil {
			return nil, err
		}
	}
	return dc.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: argoTaskResultsName}).Namespace(p.Namespace), nil
}

// reports says whether the pod has outputs to report and, if so, its node
// and Workflow.
func (o *podOutputs) reports(p *corev1.Pod) (node, wf string, ok bool) {
	node, wf = p.Annotations[argoAnnotationNode], p.Labels[argoLabelWorkflow]
	return node, wf, len(o.params) > 0 && node != "" && wf != ""
}

// initOutputs creates the pod's WorkflowTaskResult with no outputs,
// labelled report-outputs-completed=false, before the pod is reported
// started, as the wait container does first (InitializeOutput:
// cmd/argoexec/commands/wait.go line 40 and workflow/executor/executor.go
// line 831 at v3.7.15; createTaskResult in taskresult.go sets the label
// "false"). The controller then leaves a node whose pod has ended
// unchanged until the label is "true" (IsTaskResultIncomplete,
// workflow/controller/operator.go line 1192), so the pod's end cannot
// reach it before its outputs do. An existing one is left as it is (the
// wait container's empty merge patch changes nothing).
func (n *ExecNode) initOutputs(ctx context.Context, p *corev1.Pod, o *podOutputs) error {
	node, wf, ok := o.reports(p)
	if !ok {
		return nil
	}
	res, err := n.taskResults(p)
	if err != nil {
		return err
	}
	_, err = res.Create(ctx, taskResult(p, node, wf, "false", nil), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// reportOutputs writes the pod's outputs into its WorkflowTaskResult and
// labels it report-outputs-completed=true, before the pod is reported
// ended, as the wait container does before it exits (ReportOutputs, then
// FinalizeOutput: merge patches of the result, then of the label).
func (n *ExecNode) reportOutputs(ctx context.Context, p *corev1.Pod, o *podOutputs) error {
	node, wf, ok := o.reports(p)
	if !ok {
		return nil
	}
	vals := o.values()
	params := make([]any, len(vals))
	for i, v := range vals {
		params[i] = v
	}
	res, err := n.taskResults(p)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": map[string]any{argoLabelCompleted: "true"}},
		"outputs":  map[string]any{"parameters": params},
	})
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		_, err = res.Create(ctx, taskResult(p, node, wf, "true", params), metav1.CreateOptions{})
	}
	return err
}

// taskResult is the WorkflowTaskResult createTaskResult makes: named for
// the node, labelled with its Workflow and whether its outputs are all
// reported, owned by the Workflow.
func taskResult(p *corev1.Pod, node, wf, completed string, params []any) *unstructured.Unstructured {
	var owner []any
	for _, r := range p.OwnerReferences {
		if r.Kind == argoWorkflowKind {
			owner = append(owner, map[string]any{"apiVersion": argoAPIVersion, "kind": argoWorkflowKind, "name": r.Name, "uid": string(r.UID)})
		}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": argoAPIVersion, "kind": "WorkflowTaskResult",
		"metadata": map[string]any{"name": node, "namespace": p.Namespace,
			"labels":          map[string]any{argoLabelWorkflow: wf, argoLabelCompleted: completed},
			"ownerReferences": owner},
	}}
	if params != nil {
		obj.Object["outputs"] = map[string]any{"parameters": params}
	}
	return obj
}
