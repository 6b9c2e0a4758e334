package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The demo scenario in testdata/ parses, names files that exist, and its
// manifests decode into objects with the kinds the demo relies on.
func TestDemoScenarioParses(t *testing.T) {
	s, err := Load(filepath.Join("..", "..", "..", DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	if s.Pool().Name != "h100-c" || s.Pool().Nodes == 0 || s.PoolSelector() != "cloud.google.com/gke-nodepool=h100-c" {
		t.Errorf("pool to upgrade: %+v %q", s.Pool(), s.PoolSelector())
	}
	if s.Pool().KubeletVersion == s.Upgrade.KubeletVersion {
		t.Errorf("the pool to upgrade is already on %s", s.Upgrade.KubeletVersion)
	}
	if s.Gang.LastCheckpointAge.Duration <= 0 || s.Gang.CheckpointTakes.Duration <= 0 {
		t.Errorf("gang timings: %+v", s.Gang)
	}
	kinds := map[string]int{}
	jobSetFound := false
	for _, m := range s.Manifests {
		objs, err := ReadObjects(filepath.Join(s.Dir, m.File))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			kinds[o.GetKind()]++
			if o.GetKind() == "JobSet" && o.GetName() == s.Gang.JobSet && o.GetNamespace() == s.Gang.Namespace {
				jobSetFound = true
				if m.Needs != "queueing" {
					t.Errorf("%s holds the JobSet but does not need queueing", m.File)
				}
				if n := jobSetPods(o); n != 4 {
					t.Errorf("gang pods: %d", n)
				}
			}
			if o.GetKind() == "CustomResourceDefinition" {
				vs, _, _ := nestedVersions(o.Object)
				if len(vs) != 2 {
					t.Errorf("CRD versions %v (the YAML anchor of the schema must survive)", vs)
				}
			}
		}
	}
	for _, k := range []string{"Namespace", "Deployment", "PodDisruptionBudget", "ClusterQueue", "LocalQueue", "ResourceFlavor", "JobSet", "CustomResourceDefinition", "Checkpoint"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the scenario's manifests (%v)", k, kinds)
		}
	}
	if !jobSetFound {
		t.Errorf("gang %s/%s is in no manifest", s.Gang.Namespace, s.Gang.JobSet)
	}
}

func nestedVersions(obj map[string]any) ([]string, bool, error) {
	spec, _ := obj["spec"].(map[string]any)
	vs, _ := spec["versions"].([]any)
	var out []string
	for _, v := range vs {
		m, _ := v.(map[string]any)
		if _, ok := m["schema"].(map[string]any); ok {
			out = append(out, m["name"].(string))
		}
	}
	return out, true, nil
}

func TestLoadRejectsBadScenarios(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown field": "apiVersion: gpufleet.dev/v1alpha1\nkind: DemoScenario\npoolz: []\n",
		"wrong kind":    "apiVersion: v1\nkind: ConfigMap\n",
		"unknown pool":  "apiVersion: gpufleet.dev/v1alpha1\nkind: DemoScenario\nupgrade: {pool: x, target: v1.37, kubeletVersion: v1.37.2}\npools: [{name: y, nodes: 1}]\n",
		"missing file":  "apiVersion: gpufleet.dev/v1alpha1\nkind: DemoScenario\nupgrade: {pool: y, target: v1.37, kubeletVersion: v1.37.2}\npools: [{name: y, nodes: 1}]\nmanifests: [{file: nope.yaml}]\n",
		"bad duration":  "apiVersion: gpufleet.dev/v1alpha1\nkind: DemoScenario\ngang: {lastCheckpointAge: soon}\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
