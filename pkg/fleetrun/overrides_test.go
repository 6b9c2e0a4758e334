package fleetrun

import (
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// TestClusterDrainOverride: one cluster known for slow evictions drains
// with its own eviction timeout (600s where the fleet has 300s), the rest
// keep the fleet's; the plan shows it and the drain step runs it.
func TestClusterDrainOverride(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) {
		f.Spec.Upgrade.Drain = &fleetfile.Drain{OnTimeout: "abort", EvictionTimeout: "300s"}
		for i := range f.Spec.Clusters {
			if f.Spec.Clusters[i].Name == "canary-a" {
				f.Spec.Clusters[i].Drain = &fleetfile.Drain{EvictionTimeout: "600s"}
			}
		}
	})
	a, _ := h.p.Plan.Cluster("canary-a")
	b, _ := h.p.Plan.Cluster("canary-b")
	if got := strings.Join(a.DrainArgs, " "); got != "--on-timeout abort --eviction-timeout 10m0s" || !a.DrainOverride {
		t.Errorf("canary-a drain args %q (override %v)", got, a.DrainOverride)
	}
	if got := strings.Join(b.DrainArgs, " "); got != "--on-timeout abort --eviction-timeout 5m0s" || b.DrainOverride {
		t.Errorf("canary-b drain args %q (override %v)", got, b.DrainOverride)
	}
	h.runCluster(t, "canary-a")
	cmds := strings.Join(h.exec.commands(), "\n")
	if !strings.Contains(cmds, "--on-timeout abort --eviction-timeout 10m0s --context canary-a") {
		t.Errorf("canary-a's drain does not carry its own eviction timeout:\n%s", cmds)
	}
}
