package skew

import (
	"strings"
	"testing"
)

// capiAt is the Cluster API inventory of testdata/runbook with the control
// plane and the Cluster's spec.topology.version at cp and each worker pool
// at the version given.
func capiAt(t *testing.T, cp string, pools map[string]string) Inventory {
	t.Helper()
	inv := variantInventory(t, "capi")
	old := inv.Server.GitVersion
	inv.Server.GitVersion = cp
	inv.Components = append([]Component(nil), inv.Components...)
	for i := range inv.Components {
		if inv.Components[i].Version == old {
			inv.Components[i].Version = cp
		}
	}
	inv.Pools = append([]Pool(nil), inv.Pools...)
	for i := range inv.Pools {
		v := pools[inv.Pools[i].Name]
		if inv.Pools[i].Name == "control-plane" {
			v = cp
		}
		if v == "" {
			t.Fatalf("no version for pool %s", inv.Pools[i].Name)
		}
		inv.Pools[i].Versions = []VersionCount{{Version: v, Nodes: inv.Pools[i].Nodes}}
	}
	pf := *inv.Platform
	pf.ClusterAPI = append([]ClusterAPICluster(nil), pf.ClusterAPI...)
	pf.ClusterAPI[0].Version = cp
	inv.Platform = &pf
	return inv
}

// Cluster API's topology controller rolls a MachineDeployment behind the
// Cluster's spec.topology.version on its own, without waiting for a step
// of the plan, unless its topology is deferred (cluster-api v1.14.0
// exp/topology/desiredstate/desired_state.go, computeMachineDeploymentVersion).
// So where a GPU pool is behind the Cluster's version, every topology is
// deferred before the first pool step, and each GPU pool moves only once
// its own step released it, after its gangs stopped at a checkpoint: no
// GPU pool's step leaves the roll to the controller unheld.
func TestRunbookCAPIHoldsBeforeCatchUp(t *testing.T) {
	const rolls = "# the topology controller rolls the MachineDeployments to the Cluster's version"
	for _, tc := range []struct {
		name     string
		inv      Inventory
		catchUp  bool     // a hold comes before the first node-pool step
		released []string // pools whose first step releases its topologies
	}{
		{"a GPU and a CPU pool behind the Cluster's version", capiAt(t, "v1.37.2", map[string]string{"cpu": "v1.36.4", "h100-a": "v1.35.5"}), true, []string{"cpu", "h100-a"}},
		{"only the GPU pool behind", capiAt(t, "v1.37.2", map[string]string{"cpu": "v1.37.2", "h100-a": "v1.36.4"}), true, []string{"h100-a"}},
		{"the GPU pool behind, its step before the CPU pool's", capiAt(t, "v1.37.2", map[string]string{"cpu": "v1.35.5", "h100-a": "v1.36.4"}), true, []string{"cpu", "h100-a"}},
		{"only the CPU pool behind: the controller may roll it at its step", capiAt(t, "v1.37.2", map[string]string{"cpu": "v1.36.4", "h100-a": "v1.37.2"}), false, nil},
		{"no pool behind", variantInventory(t, "capi"), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.inv, "v1.38", "")
			firstPool := -1
			for i, s := range p.Steps {
				if s.Phase == PhaseNodePool && s.Pool != "control-plane" {
					firstPool = i
					break
				}
			}
			if firstPool < 0 {
				t.Fatalf("no worker pool step: %q", phases(p))
			}
			held := firstPool > 0 && p.Steps[firstPool-1].Phase == PhaseHold
			if held != tc.catchUp {
				t.Fatalf("hold before the first pool step (%d, %s): %v, want %v: %q", p.Steps[firstPool].Number, p.Steps[firstPool].Pool, held, tc.catchUp, phases(p))
			}
			if held {
				hold := cmds(p.Steps[firstPool-1])
				// Paused while the defers go in one topology at a time,
				// let go of only once every one is deferred.
				wantInOrder(t, "catch-up hold", hold, `spec: {paused: true}\n' | kubectl --context '<management-context>' apply --server-side --field-manager=gpufleet-defer-pause -f -`,
					"for MD in $(kubectl --context '<management-context>' -n fleet get cluster.cluster.x-k8s.io gpu-cell-07 -o jsonpath='{.spec.topology.workers.machineDeployments[*].name}')",
					`defer-upgrade: gpufleet-upgrade}}}]}}}\n' "$MD" | kubectl --context '<management-context>' apply --server-side --field-manager="gpufleet-defer-$MD" -f -; done`,
					"grep -v '=gpufleet-upgrade$' && \\\n",
					"metadata: {name: gpu-cell-07, namespace: fleet}\\n' | kubectl --context '<management-context>' apply --server-side --field-manager=gpufleet-defer-pause -f -")
				wantIn(t, "catch-up hold's way back", rollbackText(p.Steps[firstPool-1]), "--field-manager=gpufleet-defer-pause")
			}
			firstOf := map[string]Step{}
			for _, s := range p.Steps {
				if _, ok := firstOf[s.Pool]; s.Phase == PhaseNodePool && !ok {
					firstOf[s.Pool] = s
				}
			}
			for _, pool := range tc.released {
				c := cmds(firstOf[pool])
				wantIn(t, pool+"'s first step", c, "for MD in $TOPOLOGIES; do")
				wantNotIn(t, pool+"'s first step", c, rolls)
			}
			// Whatever the inventory, a GPU pool's step never leaves its
			// roll to an unheld topology controller, and its topologies
			// are released only once every old Machine carries the
			// pre-drain hook that keeps Cluster API's drain off the gangs
			// until gang-drain stopped them (capi_order.go).
			for _, s := range p.Steps {
				if s.Phase != PhaseNodePool || s.Pool != "h100-a" {
					continue
				}
				c := cmds(s)
				wantNotIn(t, "GPU pool step", c, rolls)
				if d, rel := strings.Index(c, "$MACHINES "+capiHook+"=gpufleet"), strings.Index(c, "for MD in $TOPOLOGIES"); d < 0 || rel < d {
					t.Errorf("step %d releases the GPU pool's topologies before its Machines are hooked:\n%s", s.Number, c)
				}
			}
		})
	}
}
