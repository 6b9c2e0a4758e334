package skew

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// TestFleetRenderFromDirReadsNoStore: with --from-dir, render plans from
// the saved reports and never reads the store (here a store whose frozen
// plan is unreadable, which a read would report as exit 3), nor any
// cluster. Without --from-dir the same store is read and fails: the
// store is really in the way.
func TestFleetRenderFromDirReadsNoStore(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "saved")
	store := filepath.Join(dir, "store")
	for _, d := range []string{saved, filepath.Dir(filepath.Join(store, fleetrun.PlanKey("r1")))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(store, fleetrun.PlanKey("r1")), []byte("{not a plan"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b"} {
		r := run(t, getter(cluster("v1.37.2")), "", "-o", "yaml")
		if err := os.WriteFile(filepath.Join(saved, c+".yaml"), []byte(r.Out), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "fleet.yaml")
	fleet := fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: gpu}
spec:
  target: {version: v1.38}
  clusters:
  - {name: a, labels: {ring: one}}
  - {name: b, labels: {ring: one}}
  rings:
  - {name: one, selector: {matchLabels: {ring: one}}}
  upgrade:
    actions:
    - manual: {}
  credentials: {secretNamespace: fleet-secrets}
  store: {url: %q}
  engine:
    argo: {image: "ghcr.io/gpufleet/suite@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
`, "file://"+store)
	if err := os.WriteFile(file, []byte(fleet), 0o600); err != nil {
		t.Fatal(err)
	}
	offline := &cli.TestClientGetter{Err: errors.New("must not touch a cluster")}
	r := run(t, offline, "", "fleet", "render", "-f", file, "--run", "r1", "--from-dir", saved)
	if r.Code != 0 || !strings.Contains(r.Out, "kind: Workflow\n") || !strings.Contains(r.Err, "without reading the store") {
		t.Fatalf("exit %d\nstdout %.400s\nstderr %s", r.Code, r.Out, r.Err)
	}
	// The kubeconfig Secrets' namespace gets its own Role and binding.
	if !strings.Contains(r.Out, "  namespace: fleet-secrets\n") || strings.Count(r.Out, "kind: RoleBinding\n") != 2 {
		t.Errorf("no Role and RoleBinding in fleet-secrets:\n%s", r.Out)
	}
	r = run(t, offline, "", "fleet", "render", "-f", file, "--run", "r1")
	if r.Code != cli.ExitUnavailable || !strings.Contains(r.Err, "plan in file://"+store+" is not readable") {
		t.Errorf("without --from-dir: exit %d, want %d from reading the store\nstderr %s", r.Code, cli.ExitUnavailable, r.Err)
	}
}
