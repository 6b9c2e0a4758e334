package fleetfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The hydrate bandwidth decodes strictly, is checked as gang-drain parses
// --hydrate-bandwidth (a known source, a byte rate), and a cluster's own
// overrides the fleet's source by source.
func TestHydrateBandwidth(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(base)
	const cluster = "  - name: canary-use1\n"
	const upgrade = "  upgrade:\n"
	if !strings.Contains(good, cluster) || !strings.Contains(good, upgrade) {
		t.Fatal("fixture changed")
	}
	with := func(fleet, own string) string {
		s := strings.Replace(good, upgrade, upgrade+"    hydrateBandwidth: "+fleet+"\n", 1)
		return strings.Replace(s, cluster, cluster+"    hydrateBandwidth: "+own+"\n", 1)
	}
	f, err := Load([]byte(with("{object-store: 1250M/s, registry: 2Gi}", "{registry: 500M/s, shared-fs: 4G/s}")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Spec.HydrateBandwidth("canary-use1"), ","); got != "object-store=1250M/s,registry=500M/s,shared-fs=4G/s" {
		t.Errorf("canary-use1: %s", got)
	}
	if got := strings.Join(f.Spec.HydrateBandwidth("prod-use1"), ","); got != "object-store=1250M/s,registry=2Gi" {
		t.Errorf("prod-use1: %s", got)
	}
	for _, tc := range []struct{ fleet, own, want string }{
		{"{s3: 1G/s}", "{}", `spec.upgrade.hydrateBandwidth[s3]: "1G/s": unknown weight source "s3": want one of object-store, registry, shared-fs`},
		{"{}", "{registry: fast}", `spec.clusters[0].hydrateBandwidth[registry]: "fast": want a byte quantity per second`},
		{"{}", "{registry: '1G,shared-fs=2G'}", `spec.clusters[0].hydrateBandwidth[registry]`},
		{"{}", "{registry: '0'}", `spec.clusters[0].hydrateBandwidth[registry]`},
		{"{object-store: 1G/s, object-store: 2G/s}", "{}", `key "object-store" already set in map`},
		// A plain number or a string is one line naming the form wanted,
		// not Go's type error.
		{"1250", "{}", `spec.upgrade.hydrateBandwidth: want a map of weight source to bytes per second, e.g. {object-store: 1250M/s}`},
		{"{}", "1G/s", `spec.clusters.hydrateBandwidth: want a map of weight source to bytes per second, e.g. {object-store: 1250M/s}`},
	} {
		_, err := Load([]byte(with(tc.fleet, tc.own)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s / %s: err %v, want %q", tc.fleet, tc.own, err, tc.want)
		}
	}
	if _, err := Load([]byte(strings.Replace(good, upgrade, upgrade+"    hydrateBandwith: {registry: 1G/s}\n", 1))); err == nil || !strings.Contains(err.Error(), `unknown field "spec.upgrade.hydrateBandwith"`) {
		t.Errorf("misspelt field: %v", err)
	}
}
