//go:build e2e

package gpuvalidatee2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// moduleDir finds a module in the module cache: a dependency of this
// repository through `go list -m`, anything else through
// `go mod download` run outside the repository (so go.mod is untouched).
func moduleDir(t *testing.T, module, version string) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if version == "" {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			t.Skipf("module %s not available: %v", module, err)
		}
		return strings.TrimSpace(string(out))
	}
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	var info struct{ Dir string }
	if err != nil || json.Unmarshal(out, &info) != nil || info.Dir == "" {
		t.Skipf("module %s@%s not available from the module proxy or cache: %v", module, version, err)
	}
	return info.Dir
}

func splitYAML(b []byte) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err == nil && u.GetKind() != "" {
			out = append(out, u)
		}
	}
	return out
}

var gvrs = map[string]schema.GroupVersionResource{
	"Secret":  {Version: "v1", Resource: "secrets"},
	"Service": {Version: "v1", Resource: "services"},
	"Job":     {Group: "batch", Version: "v1", Resource: "jobs"},
	"JobSet":  {Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"},
	"MPIJob":  {Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"},
}

// TestGPUValidateManifestsDryRun prints the NCCL test for each launcher and
// creates every object with a server-side dry run: the Job and Service
// against the core API, the JobSet and MPIJob against the CRDs from their
// own modules (sigs.k8s.io/jobset, github.com/kubeflow/mpi-operator).
func TestGPUValidateManifestsDryRun(t *testing.T) {
	cp := harness.Shared(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := map[string]string{
		"jobset": filepath.Join(moduleDir(t, "sigs.k8s.io/jobset", ""), "config/components/crd/bases"),
	}
	for launcher, fabric := range map[string]string{"job": "tcp", "jobset": "ib", "mpijob": "efa"} {
		t.Run(launcher, func(t *testing.T) {
			switch launcher {
			case "jobset":
				applyCRDDir(t, cp, crds["jobset"])
			case "mpijob":
				applyCRDDir(t, cp, filepath.Join(moduleDir(t, "github.com/kubeflow/mpi-operator", "v0.8.0"), "manifests/base"))
			}
			r := runPlugin(t, cp, "nccl", "gpu-x-0", "gpu-x-1", "--image", testImage, "--gpus-per-node", "8",
				"--launcher", launcher, "--fabric", fabric, "--print-manifest", "-n", ns)
			if r.ExitCode != 0 {
				t.Fatalf("exit %d", r.ExitCode)
			}
			objs := splitYAML([]byte(r.Stdout))
			if len(objs) == 0 {
				t.Fatal("no objects printed")
			}
			for _, o := range objs {
				gvr, ok := gvrs[o.GetKind()]
				if !ok {
					t.Fatalf("unexpected kind %s", o.GetKind())
				}
				if o.GetNamespace() != ns {
					t.Errorf("%s %s in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
				}
				_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
				if err != nil {
					t.Errorf("dry-run create %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			if strings.Contains(r.Stdout, "PRIVATE KEY") {
				t.Error("the printed manifest holds a private key")
			}
			// The plugin's own server-side dry run sends the same objects,
			// the SSH Secret included, and runs nothing.
			r = runPlugin(t, cp, "nccl", "gpu-x-0", "gpu-x-1", "--image", testImage, "--gpus-per-node", "8",
				"--launcher", launcher, "--fabric", fabric, "--dry-run=server", "-n", ns)
			if r.ExitCode != 0 || strings.Count(r.Stdout, "created (server dry run)") < len(objs) {
				t.Errorf("--dry-run=server: exit %d\n%s", r.ExitCode, r)
			}
		})
	}
}

func applyCRDDir(t *testing.T, cp *harness.ControlPlane, dir string) {
	t.Helper()
	crds, err := harness.LoadCRDs(dir)
	if err != nil || len(crds) == 0 {
		t.Skipf("no CRDs in %s: %v", dir, err)
	}
	if err := cp.ApplyCRDs(context.Background(), crds...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range crds {
			_ = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
		}
	})
}
