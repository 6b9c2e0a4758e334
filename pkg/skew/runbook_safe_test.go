package skew

import (
	"strings"
	"testing"
)

// The tests of this file hold the runbook safe to paste, provider by
// provider: holds found from the provider's objects, backups off the node,
// install settings kept, one alternative per block, gates that gate.

// relabel returns the inventory with every pool that is not the
// control plane grouped by label instead of the provider's own label.
func relabel(inv Inventory, label string) Inventory {
	out := inv
	out.Pools = nil
	for _, p := range inv.Pools {
		if p.Label != controlPlaneRoles[0] && p.Label != controlPlaneRoles[1] {
			p.Label = label
		}
		out.Pools = append(out.Pools, p)
	}
	return out
}

func planOf(t *testing.T, inv Inventory, target string, prov Provider) Plan {
	t.Helper()
	p, err := MakePlan(inv, MustParseVersion(target), PlanOptions{Provider: prov})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Holds are decided from the provider: on Cluster API from the Cluster's
// spec.topology.workers.machineDeployments (Nodes carry no MachineDeployment
// label by default), on GKE always (every node pool auto-upgrades), never
// from the label that grouped the nodes here.
func TestRunbookHoldsFromTheProvider(t *testing.T) {
	capi := variantInventory(t, "capi")
	noWorkers := variantInventory(t, "capi")
	pf := *noWorkers.Platform
	pf.ClusterAPI = []ClusterAPICluster{{Namespace: "fleet", Name: "gpu-cell-07", Class: "gpu-training-cell", Version: "v1.36.4", WorkersRead: true, MachinePools: []string{"mp-0"}}}
	noWorkers.Platform = &pf
	for _, tc := range []struct {
		name  string
		inv   Inventory
		prov  Provider
		holds int // hold steps
		wants []string
	}{
		{"capi: stock Nodes grouped by a node.cluster.x-k8s.io label", capi, "", 2,
			[]string{`for MD in $(kubectl --context '<management-context>' -n fleet get cluster.cluster.x-k8s.io gpu-cell-07 -o jsonpath='{.spec.topology.workers.machineDeployments[*].name}')`,
				`--field-manager="gpufleet-defer-$MD"`, "defer-upgrade: gpufleet-upgrade", "grep -v '=gpufleet-upgrade$'"}},
		{"capi: Nodes with no pool label at all", relabel(capi, ""), "", 2, []string{"defer-upgrade: gpufleet-upgrade"}},
		{"capi chosen with --provider: worker topologies read when the hold runs", variantInventory(t, "kubeadm-apt"), ProviderCAPI, 2,
			[]string{".spec.topology.workers.machineDeployments[*].name"}},
		{"capi: the Cluster has no MachineDeployment topology", noWorkers, "", 0, nil},
		{"gke: pools grouped by node.kubernetes.io/pool", relabel(variantInventory(t, "gke"), "node.kubernetes.io/pool"), "", 1,
			[]string{"--add-maintenance-exclusion-scope=no_minor_or_node_upgrades"}},
		{"gke: pools grouped by GKE's label", variantInventory(t, "gke"), "", 1, []string{"--add-maintenance-exclusion-until-end-of-support"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.inv, "v1.38", tc.prov)
			var holds []Step
			for i, s := range p.Steps {
				if s.Phase != PhaseHold {
					continue
				}
				holds = append(holds, s)
				if next := p.Steps[i+1]; next.Phase != PhaseControlPlane {
					t.Errorf("hold step %d is followed by %s, not the control-plane step", s.Number, next.Phase)
				}
				wantIn(t, "hold", cmds(s), tc.wants...)
			}
			if len(holds) != tc.holds {
				t.Fatalf("%d hold steps, want %d: %q", len(holds), tc.holds, phases(p))
			}
		})
	}
	// Cluster API: the control-plane step moves the version only while
	// every topology is deferred; each worker pool releases the topologies
	// of its own nodes, found from the Machines, after its gangs stopped;
	// the hop's last pool step releases whatever is left.
	p := planOf(t, capi, "v1.38", "")
	cp := stepOf(t, p, PhaseControlPlane, "")
	wantIn(t, "control plane", cmds(cp), "grep -v '=gpufleet-upgrade$' && \\", `patch cluster.cluster.x-k8s.io gpu-cell-07 -n fleet --type merge`)
	gpu := cmds(stepOf(t, p, PhaseNodePool, "h100-a"))
	wantIn(t, "GPU pool", gpu, "get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=gpu-cell-07", "topology\\.cluster\\.x-k8s\\.io/deployment-name",
		"kubectl get nodes -l node.cluster.x-k8s.io/pool=h100-a", "for MD in $TOPOLOGIES; do", "metadata: {}")
	if strings.Index(gpu, "kubectl gang-drain run") > strings.Index(gpu, "for MD in $TOPOLOGIES") {
		t.Errorf("the GPU pool's topologies are released before its gangs stopped:\n%s", gpu)
	}
	releasedAll := 0
	for _, s := range p.Steps {
		if strings.Contains(cmds(s), "undo any defer-upgrade left") {
			releasedAll++
			if !r0(p).lastPoolStepOfHop(s) {
				t.Errorf("step %d releases every topology before the hop's last pool step", s.Number)
			}
		}
	}
	if releasedAll != 2 {
		t.Errorf("every topology released %d times, want once per hop (2)", releasedAll)
	}
}

// r0 is a renderer over a plan's steps, for lastPoolStepOfHop.
func r0(p Plan) *renderer { return &renderer{plan: &p} }
