package gpuvalidate

import (
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
)

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

func TestGolden_Wave(t *testing.T) {
	configzFixture(t, map[string]string{"old-0": "configz-1.36.json", "new-0": "configz-1.37-drift.json", "new-1": "configz-1.37-clean.json", "new-2": "configz-1.37-clean.json"}, false)
	objs := func() *fake.Clientset {
		return fake.NewClientset(node("old-0", "h100-a", "v1.36.4", 8, 8), node("new-0", "h100-a", "v1.37.2", 8, 8),
			node("new-1", "h100-a", "v1.37.2", 8, 8), node("new-2", "h100-a", "v1.37.2", 7, 7))
	}
	for _, tc := range []struct{ name, format string }{
		{"wave.table.golden", "table"}, {"wave.wide.golden", "wide"}, {"wave.json.golden", "json"}, {"wave.yaml.golden", "yaml"},
	} {
		out, errOut, code := run(t, objs(), "nodes", "new-0", "new-1", "new-2", "--expected-gpus", "8", "-o", tc.format, "--color", "never")
		if code != cli.ExitFindings || errOut != "" {
			t.Fatalf("%s: exit %d stderr %q", tc.format, code, errOut)
		}
		golden(t, tc.name, out)
	}
	out, _, _ := run(t, objs(), "nodes", "new-2", "--expected-gpus", "8", "--color", "always")
	golden(t, "wave.color.golden", out)
}
