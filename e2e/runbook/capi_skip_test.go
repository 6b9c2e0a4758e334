package runbooke2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCAPISkip: of the Cluster API runbook the plugin's golden test pins,
// the lane skips, in each GPU pool step, only the unit block (it waits for
// the rollout to delete a hooked Machine, which the mirror never does) and
// the restore of the gangs that block's run stopped; no block of a CPU pool
// step, no rollback block, and nothing of another provider.
func TestCAPISkip(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "plugins", "skew", "testdata", "runbook", "capi.md.golden"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := ParseRunbook(string(md))
	if err != nil {
		t.Fatal(err)
	}
	capi, other := Scenario{Provider: "capi", Variant: "gpu-pools"}, Scenario{Provider: "kubeadm", Variant: "gpu-pools"}
	units, restores := 0, 0
	for _, st := range steps {
		for i, b := range st.Blocks {
			if capiSkip(other, st.Blocks, i) != "" {
				t.Errorf("step %d block %d skipped for kubeadm", st.Number, i)
			}
			why := capiSkip(capi, st.Blocks, i)
			text := b.Text()
			unit := strings.Contains(text, "--for=delete") && strings.Contains(text, capiUnitHook+"-")
			restore := strings.Contains(text, "gang-drain restore") && !b.Rollback && st.Phase == "node-pool" && strings.HasPrefix(st.Name, "h100")
			switch {
			case unit || restore:
				if why == "" {
					t.Errorf("step %d (%s) block %d pasted:\n%s", st.Number, st.Name, i, text)
				}
				if unit {
					units++
				} else {
					restores++
				}
			case why != "":
				t.Errorf("step %d (%s) block %d skipped:\n%s", st.Number, st.Name, i, text)
			}
		}
	}
	if units == 0 || restores == 0 {
		t.Errorf("%d unit blocks and %d restores skipped, want some of each", units, restores)
	}
}
