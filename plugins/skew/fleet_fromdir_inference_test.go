package skew

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// fleet plan --from-dir plans an inference pool from what the saved report
// holds: a read at the fleet file's bandwidth as it is (its ETA in the
// plan), a read at another bandwidth, or none at all (the version check's
// report), as one warning that the pool must be planned live; neither
// fails the plan.
func TestFleetPlanFromDirInferencePool(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "saved")
	if err := os.MkdirAll(saved, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: gpu}
spec:
  target: {version: v1.38}
  clusters:
  - {name: a, labels: {ring: one}}
  rings:
  - {name: one, selector: {matchLabels: {ring: one}}}
  upgrade:
    hydrateBandwidth: {object-store: 1250M/s}
    actions:
    - manual: {}
  store: {url: %q}
`, "file://"+filepath.Join(dir, "store"))), 0o600); err != nil {
		t.Fatal(err)
	}
	// inferenceRead saves the inventory the plan reads (the inference
	// read) at bandwidth bw, as a report holding it.
	inferenceRead := func(bw []string) []byte {
		t.Helper()
		b, err := inference.ParseBandwidth(bw)
		if err != nil {
			t.Fatal(err)
		}
		_, inv, err := collectInventory(context.Background(), getter(cluster("v1.37.2", surgeCluster()...)), testDeps(), "", 500, false, true, b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := yaml.Marshal(map[string]any{"inventory": inv})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	versionCheck := run(t, getter(cluster("v1.37.2", surgeCluster()...)), "", "-o", "yaml").Out
	for _, tc := range []struct {
		name   string
		report []byte
		// warn is the one warning's words, "" for none; drain the pool's
		// drain step's action.
		warn, drain string
	}{
		{"version check's report", []byte(versionCheck),
			"GPU pool(s) h100-f, h100-s: the saved report holds no read of their workloads", "kubectl gang-drain run -l cloud.google.com/gke-nodepool=h100-s: checkpoint"},
		{"read without a bandwidth", inferenceRead(nil),
			"inference pool(s) h100-s (read at no hydrate bandwidth; refused then: no hydrate bandwidth for source object-store", "kubectl gang-drain run --inference -l cloud.google.com/gke-nodepool=h100-s: surge the 1 model Deployment, then drain in waves paced by hydrate bandwidth\n"},
		{"read at another bandwidth", inferenceRead([]string{"object-store=100M/s"}),
			"inference pool(s) h100-s (read at object-store=100000000/s)", "paced by hydrate bandwidth\n"},
		{"read at the fleet file's bandwidth", inferenceRead([]string{"object-store=1250M/s"}),
			"", "paced by hydrate bandwidth (2 waves, ETA 4m1s at object-store=1250000000/s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(saved, "a.yaml"), tc.report, 0o600); err != nil {
				t.Fatal(err)
			}
			r := run(t, getter(cluster("v1.37.2")), "", "fleet", "plan", "-f", file, "--from-dir", saved, "-o", "wide")
			all := r.Out + r.Err
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, all)
			}
			got := strings.Count(all, "the saved report holds no read") + strings.Count(all, "inference pool(s) h100-s")
			switch {
			case tc.warn == "" && got != 0:
				t.Errorf("a warning for a read at the fleet file's bandwidth:\n%s", all)
			case tc.warn != "" && (got != 1 || !strings.Contains(all, tc.warn) || !strings.Contains(all, " live (kubectl skew fleet plan without --from-dir)")):
				t.Errorf("want one warning %q saying to plan live, got %d:\n%s", tc.warn, got, all)
			}
			p := run(t, getter(cluster("v1.37.2")), "", "fleet", "plan", "-f", file, "--from-dir", saved, "-o", "json")
			var plan fleetrun.Plan
			if err := json.Unmarshal([]byte(p.Out), &plan); err != nil || len(plan.Clusters) != 1 {
				t.Fatalf("-o json: %v\n%.400s", err, p.Out)
			}
			var drain string
			for _, s := range plan.Clusters[0].Steps {
				if s.Name == "pool-h100-s-1-38-drain" {
					drain = s.Action
				}
			}
			if !strings.Contains(drain+"\n", tc.drain) {
				t.Errorf("drain step: want %q in %q", tc.drain, drain)
			}
		})
	}
}
