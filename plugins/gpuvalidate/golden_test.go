package gpuvalidate

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
)

// golden checks got against testdata/name; a default table (name.table.golden)
// must also fit the 120-column budget.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name, got)
	if strings.HasSuffix(name, ".table.golden") {
		goldenfile.CheckFits(t, got, cli.DefaultTableWidth)
	}
}

func TestGolden_Wave(t *testing.T) {
	configzFixture(t, map[string]string{"gke-gpu-prod-h100-c-8f3a2b1c-a1b2": "configz-1.36.json", "gke-gpu-prod-h100-c-8f3a2b1c-x7k2": "configz-1.37-drift.json", "gke-gpu-prod-h100-c-8f3a2b1c-m4p9": "configz-1.37-clean.json", "gke-gpu-prod-h100-c-8f3a2b1c-q2w8": "configz-1.37-clean.json"}, false)
	objs := func() *fake.Clientset {
		return fake.NewClientset(node("gke-gpu-prod-h100-c-8f3a2b1c-a1b2", "h100-c", "v1.36.4", 8, 8), node("gke-gpu-prod-h100-c-8f3a2b1c-x7k2", "h100-c", "v1.37.2", 8, 8),
			node("gke-gpu-prod-h100-c-8f3a2b1c-m4p9", "h100-c", "v1.37.2", 8, 8), node("gke-gpu-prod-h100-c-8f3a2b1c-q2w8", "h100-c", "v1.37.2", 7, 7))
	}
	for _, tc := range []struct{ name, format string }{
		{"wave.table.golden", "table"}, {"wave.wide.golden", "wide"}, {"wave.json.golden", "json"}, {"wave.yaml.golden", "yaml"},
	} {
		out, errOut, code := run(t, objs(), "nodes", "gke-gpu-prod-h100-c-8f3a2b1c-x7k2", "gke-gpu-prod-h100-c-8f3a2b1c-m4p9", "gke-gpu-prod-h100-c-8f3a2b1c-q2w8", "--expected-gpus", "8", "-o", tc.format, "--color", "never")
		if code != cli.ExitFindings || errOut != "" {
			t.Fatalf("%s: exit %d stderr %q", tc.format, code, errOut)
		}
		golden(t, tc.name, out)
	}
	out, _, _ := run(t, objs(), "nodes", "gke-gpu-prod-h100-c-8f3a2b1c-q2w8", "--expected-gpus", "8", "--color", "always")
	golden(t, "wave.color.golden", out)
}

// The Xid catalogue: its default table fits 120 columns with the
// descriptions and actions shortened with a mark; -o wide has them whole.
func TestGolden_XidCatalog(t *testing.T) {
	out, _, code := run(t, fake.NewClientset(), "xid-catalog")
	if code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	golden(t, "xid-catalog.table.golden", out)
	wide, _, _ := run(t, fake.NewClientset(), "xid-catalog", "-o", "wide")
	golden(t, "xid-catalog.wide.golden", wide)
	js, _, _ := run(t, fake.NewClientset(), "xid-catalog", "-o", "json")
	golden(t, "xid-catalog.json.golden", js)
	if strings.Contains(wide, cli.ElisionMark) || !strings.Contains(wide, "INVESTIGATORY-ACTION") {
		t.Errorf("-o wide shortened a value or lacks a column")
	}
}
