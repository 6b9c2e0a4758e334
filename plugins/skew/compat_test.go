package skew

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestCompatTable: each row prints its rule, releases and the date its
// source was read; -o wide adds the source, every release row and the notes;
// a table over 120 days old says the addons gate warns.
func TestCompatTable(t *testing.T) {
	cg := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	r := run(t, cg, "", "compat")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Err)
	}
	for _, want := range []string{
		"ADDON", "READ",
		"26.7:1.33..1.36",
		"0.20:1.10+",
		"no published range",
		"1.33:v1.17.1+",
		"(+30, -o wide)",
	} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("compat lacks %q:\n%s", want, r.Out)
		}
	}
	for _, line := range strings.Split(r.Out, "\n") {
		if strings.HasPrefix(line, "kueue ") && !strings.Contains(line, "2026-12-04") {
			t.Errorf("kueue row without the date read: %s", line)
		}
	}
	w := run(t, cg, "", "compat", "-o", "wide")
	if !strings.Contains(w.Out, "REVISED") || !strings.Contains(w.Out, "2026-08-22") {
		t.Errorf("wide: the revision each row was read at\n%s", w.Out)
	}
	if !strings.Contains(w.Out, "0.21:1.21..1.24") || !strings.Contains(w.Out, "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html") || !strings.Contains(w.Out, "only a lower bound is published") || !strings.Contains(w.Out, "NOTE") {
		t.Errorf("wide: every row and the notes\n%s", w.Out)
	}
	path := filepath.Join(t.TempDir(), "old.yaml")
	if err := os.WriteFile(path, []byte("dataDate: \"2026-01-02\"\naddons:\n- {name: cluster-autoscaler, rule: matchMinor, read: \"2026-01-02\", source: https://example.com}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := run(t, cg, "", "compat", "--compat", path)
	if old.Code != 0 || !strings.Contains(old.Out, "compatibility data from 2026-01-02 (") || !strings.Contains(old.Out, "over 120 days: the addons gate warns") {
		t.Errorf("old table: exit %d\n%s%s", old.Code, old.Out, old.Err)
	}
}
