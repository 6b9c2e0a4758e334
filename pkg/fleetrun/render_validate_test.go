package fleetrun

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// TestRenderPassesArgoValidation runs Argo's own validation (the
// e2e/tools/argo validate command, argo-workflows v3.7.15's
// workflow/validate package, strict decoding) on a render with every
// option the render knows: the check e2e/fleet makes before applying a
// run, here on each change to the render. It needs the command built by
// e2e/tools/build.sh argo, and skips without it.
func TestRenderPassesArgoValidation(t *testing.T) {
	bin := os.Getenv("ARGO_VALIDATE")
	if bin == "" {
		dir := os.Getenv("E2E_BIN_DIR")
		if dir == "" {
			c, err := os.UserCacheDir()
			if err != nil {
				t.Skip(err)
			}
			dir = filepath.Join(c, "gpufleet-e2e")
		}
		bin = filepath.Join(dir, "argo-v3.7.15", "validate")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no Argo validate command (%v): e2e/tools/build.sh argo builds it", err)
	}
	plan := planRun(t, func(f *fleetfile.Fleet) {
		f.Spec.Credentials = &fleetfile.Credentials{SecretNamespace: "fleet-secrets"}
		f.Spec.Engine.Argo.StoreSecret = "fleet-store"
	})
	for _, perCluster := range []bool{false, true} {
		r, err := Render(plan, RenderOptions{WorkflowPerCluster: perCluster})
		if err != nil {
			t.Fatal(err)
		}
		y := r.YAML
		if perCluster {
			// Each cluster's Workflow as the run's resource template
			// creates it, resolved against its WorkflowTemplate.
			var wf *unstructured.Unstructured
			for _, o := range renderedObjects(t, y) {
				if o.GetKind() == "Workflow" {
					wf = o
				}
			}
			for i, ch := range childWorkflows(t, wf) {
				ch.SetName(fmt.Sprintf("%s%05d", ch.GetGenerateName(), i))
				b, err := yaml.Marshal(ch.Object)
				if err != nil {
					t.Fatal(err)
				}
				y = append(append(y, "---\n"...), b...)
			}
		}
		p := filepath.Join(t.TempDir(), "run.yaml")
		if err := os.WriteFile(p, y, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, p).CombinedOutput()
		if err != nil {
			t.Fatalf("per-cluster %v: Argo's validation refused the render: %v\n%s", perCluster, err, out)
		}
		t.Logf("per-cluster %v: %s", perCluster, strings.TrimSpace(string(out)))
	}
}
