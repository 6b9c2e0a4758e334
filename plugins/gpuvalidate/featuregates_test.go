package gpuvalidate

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// feature-gates prints the removed-gate data with its source; -o yaml is
// a valid --removed-gates file, which nodes and feature-gates read back.
func TestFeatureGatesCmd(t *testing.T) {
	kube := fake.NewClientset()
	out, errOut, code := run(t, kube, "feature-gates")
	if code != cli.ExitOK || !regexp.MustCompile(`DevicePluginCDIDevices +1\.34 +GA`).MatchString(out) ||
		!regexp.MustCompile(`removed gates from https://github.com/kubernetes/kubernetes`).MatchString(out) {
		t.Fatalf("exit %d %s\n%s", code, errOut, out)
	}
	y, _, code := run(t, kube, "feature-gates", "-o", "yaml")
	if code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	fg, err := apilifecycle.ParseFeatureGates([]byte(y))
	if err != nil || len(fg.Gates) != len(apilifecycle.DefaultFeatureGates().Gates) {
		t.Fatalf("-o yaml does not read back: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "gates.yaml")
	if err := os.WriteFile(file, []byte("dataDate: \"2026-12-01\"\nsource: test\ngates:\n- {name: Foo, removedIn: \"1.37\", lastStage: GA}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := run(t, kube, "feature-gates", "--removed-gates", file); code != cli.ExitOK || !regexp.MustCompile(`Foo +1\.37 +GA`).MatchString(out) {
		t.Errorf("override: exit %d\n%s", code, out)
	}
	// A file that cannot be read is refused as an input file (3); the flag
	// without --config-drift is a usage error (2).
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"feature-gates", "--removed-gates", filepath.Join(dir, "missing.yaml")}, cli.ExitUnavailable},
		{[]string{"nodes", "a", "--config-drift=false", "--removed-gates", file}, cli.ExitUsage},
		{[]string{"nodes", "a", "--removed-gates", filepath.Join(dir, "missing.yaml")}, cli.ExitUnavailable},
	} {
		if _, errOut, code := run(t, kube, tc.args...); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errOut)
		}
	}
}
