package fleetrun

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// monday0930 is a Monday at 09:30 in Los Angeles (17:30 UTC): the prod
// window (01:00-05:00 LA, weekdays) is closed.
var monday0930 = time.Date(2026, 11, 2, 17, 30, 0, 0, time.UTC)

func loadFleet(t testing.TB, mutate func(*fleetfile.Fleet)) *fleetfile.Fleet {
	t.Helper()
	f, err := fleetfile.LoadFile(filepath.Join("testdata", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(f)
	}
	return f
}

// inventory is a cluster with the apiserver at cp and one GPU pool per
// (name, kubelet) pair, labelled like GKE node pools.
func inventory(cp string, pools ...string) pkgskew.Inventory {
	inv := pkgskew.Inventory{Server: pkgskew.ServerVersion{GitVersion: cp}}
	for i := 0; i+1 < len(pools); i += 2 {
		one := 4
		inv.Pools = append(inv.Pools, pkgskew.Pool{Name: pools[i], Label: "cloud.google.com/gke-nodepool", Nodes: 4,
			Versions: []pkgskew.VersionCount{{Version: pools[i+1], Nodes: 4}}, GPUNodes: &one})
	}
	return inv
}

// infos reads every ringed cluster at 1.38 with a GPU pool at 1.35 and
// the given GPUs (64 unless named).
func infos(f *fleetfile.Fleet, gpus map[string]int) map[string]ClusterInfo {
	out := map[string]ClusterInfo{}
	for _, c := range ringed(f) {
		g, ok := gpus[c.Name]
		if !ok {
			g = 64
		}
		out[c.Name] = ClusterInfo{Inventory: inventory("v1.38.1", "gpu-a", "v1.35.4"), GPUs: g}
	}
	return out
}

func mustPlan(t testing.TB, f *fleetfile.Fleet, in map[string]ClusterInfo, now time.Time) *Plan {
	t.Helper()
	p, err := MakePlan(f, in, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tempStore(t testing.TB) *DirStore {
	t.Helper()
	s, err := OpenDirStore(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func osWriteFile(p string, b []byte) error { return os.WriteFile(p, b, 0o600) }
