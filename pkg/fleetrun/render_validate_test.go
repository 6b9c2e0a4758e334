package fleetrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	_, r := mustRender(t, func(f *fleetfile.Fleet) {
		f.Spec.Credentials = &fleetfile.Credentials{SecretNamespace: "fleet-secrets"}
		f.Spec.Engine.Argo.StoreSecret = "fleet-store"
	})
	p := filepath.Join(t.TempDir(), "run.yaml")
	if err := os.WriteFile(p, r.YAML, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, p).CombinedOutput()
	if err != nil {
		t.Fatalf("Argo's validation refused the render: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
