package skew

import (
	"os"
	"testing"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := readSaved("-", func() ([]byte, error) { return data, nil })
		if err == nil && rep.Inventory.Server.GitVersion == "" && len(rep.Inventory.Pools) == 0 && len(rep.Inventory.Components) == 0 {
			t.Fatal("report without an inventory accepted")
		}
	})
}
