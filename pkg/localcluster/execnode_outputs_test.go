//go:build linux

package localcluster

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
