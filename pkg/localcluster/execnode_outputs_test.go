//go:build linux

package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	fakekube "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestTemplateOutputs: a pod's output parameter paths (from ARGO_TEMPLATE)
// become files of its own, named in its arguments in the path's place, and
// read back as the wait container reports them: the content, else the
// default, else nothing.
func TestTemplateOutputs(t *testing.T) {
	tmpl := `{"name":"gate","outputs":{"parameters":[` +
		`{"name":"wait","valueFrom":{"path":"/tmp/gpufleet-wait","default":"0"}},` +
		`{"name":"other","valueFrom":{"path":"/tmp/other"}},` +
		`{"name":"plain","value":"x"}]}}`
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run-gate-1"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{{Name: argoEnvTemplate, Value: tmpl}}}},
		Containers:     []corev1.Container{{Name: "main"}, {Name: "wait"}}}}
	dir := t.TempDir()
	o, err := templateOutputs(p, dir)
	if err != nil {
		t.Fatal(err)
	}
	file := o.files["/tmp/gpufleet-wait"]
	if filepath.Dir(file) != filepath.Join(dir, "run-gate-1.outputs") {
		t.Fatalf("wait file %q: want one under the pod's own folder", file)
	}
	argv := o.argv([]string{"kubectl-skew", "fleet", "gate", "--wait-file", "/tmp/gpufleet-wait", "--other=/tmp/other", "/tmp/unrelated"})
	if argv[4] != file || argv[5] != "--other="+o.files["/tmp/other"] || argv[6] != "/tmp/unrelated" {
		t.Errorf("argv %q", argv)
	}
	if v := o.values(); len(v) != 1 || v[0]["name"] != "wait" || v[0]["value"] != "0" {
		t.Errorf("no file written: %v, want wait=0 (its default) alone", v)
	}
	if err := os.WriteFile(file, []byte("37"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.files["/tmp/other"], []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v := o.values(); len(v) != 2 || v[0]["value"] != "37" || v[1]["name"] != "other" || v[1]["value"] != "y" {
		t.Errorf("files written: %v, want wait=37 and other=y", v)
	}
	none, err := templateOutputs(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, dir)
	if err != nil || len(none.params) != 0 || none.argv([]string{"a"})[0] != "a" {
		t.Errorf("a pod without a template: %+v %v", none, err)
	}
}

// TestTaskResultBeforeRunning: the exec node creates the pod's
// WorkflowTaskResult labelled report-outputs-completed=false, with no
// outputs, before it reports the pod running, and labels it true with
// the outputs (one trailing newline trimmed) before it reports the pod
// ended, so the controller cannot complete the node without its outputs.
func TestTaskResultBeforeRunning(t *testing.T) {
	tmpl := `{"name":"gate","outputs":{"parameters":[{"name":"wait","valueFrom":{"path":"/tmp/gpufleet-wait","default":"0"}}]}}`
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "wf-gate-1", Namespace: "argo", UID: "u-1",
			Labels:          map[string]string{argoLabelWorkflow: "wf"},
			Annotations:     map[string]string{argoAnnotationNode: "wf-123"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: argoAPIVersion, Kind: argoWorkflowKind, Name: "wf", UID: "w-1"}}},
		Spec: corev1.PodSpec{NodeName: "fleet-exec",
			InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{{Name: argoEnvTemplate, Value: tmpl}}}},
			Containers: []corev1.Container{{Name: "main", Command: []string{"sh", "-c", `printf '37\n' > "$1"`, "sh", "/tmp/gpufleet-wait"}},
				{Name: "wait"}}}}
	kube := fakekube.NewClientset(p)
	trGVR := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: argoTaskResultsName}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{trGVR: "WorkflowTaskResultList"})
	// What the task result said each time the pod's status was written.
	var seen []string
	kube.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		phase := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod).Status.Phase
		tr, err := dyn.Resource(trGVR).Namespace("argo").Get(context.Background(), "wf-123", metav1.GetOptions{})
		if err != nil {
			seen = append(seen, fmt.Sprintf("%s: %v", phase, err))
			return false, nil, nil
		}
		ps, _, _ := unstructured.NestedSlice(tr.Object, "outputs", "parameters")
		seen = append(seen, fmt.Sprintf("%s: %s=%s %v", phase, argoLabelCompleted, tr.GetLabels()[argoLabelCompleted], ps))
		return false, nil, nil
	})
	n := &ExecNode{Name: "fleet-exec", cp: &Cluster{Client: kube}, dyn: dyn, opts: ExecNodeOptions{Dir: t.TempDir()},
		running: map[string]*exec.Cmd{}, handled: map[string]bool{}}
	n.run(context.Background(), p)
	want := []string{
		"Running: " + argoLabelCompleted + "=false []",
		"Succeeded: " + argoLabelCompleted + "=true [map[name:wait value:37]]",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("task result at each pod status:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	tr, err := dyn.Resource(trGVR).Namespace("argo").Get(context.Background(), "wf-123", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.GetLabels()[argoLabelWorkflow] != "wf" || len(tr.GetOwnerReferences()) != 1 || tr.GetOwnerReferences()[0].Name != "wf" {
		t.Errorf("task result labels %v, owners %v", tr.GetLabels(), tr.GetOwnerReferences())
	}
}
