package skew

import (
	"strings"
	"testing"
)

// A provider-rolled GPU pool's order. Cluster API's MachineSet deletes
// first the Machines annotated cluster.x-k8s.io/delete-machine and drains
// none that carries a pre-drain.delete.hook annotation (cluster-api
// v1.14.0, capi_order.go), so on Cluster API the runbook sets the order:
// every old Machine is hooked before the topology is released, and a
// unit's Machines are marked and unhooked, in one write, only after
// gang-drain emptied the unit, the unit being that of a Machine the
// rollout already holds at the hook. EKS managed node groups, GKE and AKS
// offer no such lever: their text still says the provider picks.
func TestRunbookProviderGPUOrder(t *testing.T) {
	const picks = "replaces this pool's nodes in an order it picks"
	for _, tc := range []struct {
		variant string
		pool    string
		ordered bool // the runbook sets the order of the pool's replacement
	}{
		{"capi", "h100-a", true},
		{"eks-managed", "", false},
		{"gke", "", false},
		{"aks", "", false},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			p := variantPlan(t, tc.variant)
			var gpuSteps []Step
			for _, s := range p.Steps {
				if s.Phase != PhaseNodePool || (tc.pool != "" && s.Pool != tc.pool) {
					continue
				}
				if strings.Contains(cmds(s), "kubectl gang-drain run") {
					gpuSteps = append(gpuSteps, s)
				}
			}
			if len(gpuSteps) == 0 {
				t.Fatalf("no GPU pool step drained with gang-drain")
			}
			warn := strings.Join(p.Warnings, "\n")
			for _, s := range gpuSteps {
				c := cmds(s)
				if !tc.ordered {
					wantIn(t, "step", c, picks)
					wantNotIn(t, "step", c, capiDeleteFirst, capiHook)
					wantIn(t, "Before you start", warn, "replaces the nodes itself in an order it picks")
					continue
				}
				wantNotIn(t, "step", c, picks)
				// Hooked, then released; then per unit: the unit the
				// rollout holds, drained, then marked and unhooked in
				// one annotate, then waited out; the gangs come back
				// only after validation.
				wantInOrder(t, "step", c,
					"annotate machines.cluster.x-k8s.io $MACHINES "+capiHook+"=gpufleet --overwrite",
					"for MD in $TOPOLOGIES; do",
					"{.metadata.deletionTimestamp} {.status.nodeRef.name}",
					`UNIT=$(kubectl get node "$NODE"`,
					"kubectl gang-drain run $NODES --run-id",
					"annotate machines.cluster.x-k8s.io $UNIT_MACHINES "+capiDeleteFirst+"=gpufleet "+capiHook+"-",
					"wait machines.cluster.x-k8s.io $UNIT_MACHINES --for=delete",
					"kubectl gpu-validate nodes",
					"kubectl gang-drain restore")
				// Only Machines not yet at the step's minor are hooked or
				// marked: a new Machine marked delete-machine would go
				// first at a later scale-down.
				if n := strings.Count(c, `$3 !~ /^v`+strings.ReplaceAll(s.To, ".", `\.`)+`\./`); n != 4 {
					t.Errorf("step %d: %d Machine lists skip the step's minor, want 4 (hooked, checked, left, marked):\n%s", s.Number, n, c)
				}
				// The way back keeps the hooks and restores the run once
				// the new nodes validate (TestCAPIRollbackGoesForward).
				wantNotIn(t, "rollback", rollbackText(s), capiHook+"-")
			}
			if tc.ordered {
				wantNotIn(t, "Before you start", warn, "Cluster API replaces the nodes itself in an order it picks")
				wantIn(t, "Before you start", warn, "pool h100-a: Cluster API's rollout is ordered by the runbook")
			}
		})
	}
}
