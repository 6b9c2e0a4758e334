package skew

import (
	"io"
	"os"
	"testing"

	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// FuzzReadSaved: a saved report given to --from-file (a file from a change
// ticket, or stdin) never makes the reader panic or hang, and what it
// accepts has an inventory to plan from.
func FuzzReadSaved(f *testing.F) {
	for _, golden := range []string{"testdata/check.yaml.golden", "testdata/check.json.golden"} {
		if b, err := os.ReadFile(golden); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("apiVersion: gpufleet.dev/v1alpha1\nkind: SkewReport\ninventory: {server: {gitVersion: v1.37.2}}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("apiVersion: gpufleet.dev/v1alpha1\nkind: SkewReport\ninventory: {server: {gitVersion: v1.36.2-eks-1}, pools: [{name: a, label: eks.amazonaws.com/nodegroup, nodes: 1, versions: [{version: v1.33.1, nodes: 1}], gpuNodes: 0}], platform: {providerIDs: {aws: 1}, resourceGroup: MC_a_b_c, clusterAPI: [{namespace: n, name: c, class: k}]}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := readSaved("-", func() ([]byte, error) { return data, nil })
		if err == nil && rep.Inventory.Server.GitVersion == "" && len(rep.Inventory.Pools) == 0 && len(rep.Inventory.Components) == 0 {
			t.Fatal("report without an inventory accepted")
		}
		if err != nil {
			return
		}
		// What it accepts plans and prints as a runbook without panicking,
		// whatever the platform facts say.
		if plan, err := pkgskew.MakePlan(rep.Inventory, pkgskew.MustParseVersion("v1.38"), pkgskew.PlanOptions{}); err == nil {
			_ = printRunbook(io.Discard, &PlanReport{Provider: plan.Provider, Steps: plan.Steps, Summary: plan.Summary, Warnings: plan.Warnings})
		}
	})
}
