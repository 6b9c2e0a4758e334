package fleetfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestLoadExample(t *testing.T) {
	f, err := LoadFile(filepath.Join("testdata", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(f.Spec.Clusters); got != 4 {
		t.Fatalf("clusters = %d, want 4", got)
	}
	if got := f.Spec.Clusters[1].ContextName(); got != "admin@prod-use1" {
		t.Errorf("context = %q", got)
	}
	if got := f.Spec.Clusters[0].ContextName(); got != "canary-use1" {
		t.Errorf("default context = %q, want the cluster name", got)
	}
	if got := f.Spec.Rings[1].Soak.Value(); got != 72*time.Hour {
		t.Errorf("soak 3d = %v", got)
	}
	if got := f.Spec.DRPairs.Key(); got != DRPairLabel {
		t.Errorf("dr key = %q", got)
	}
}

// TestLoadErrors: every bad file is one line naming the field path.
func TestLoadErrors(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(base)
	cases := []struct {
		name, old, new, want string
	}{
		{"unknown field", "    soak: 48h\n", "    soke: 48h\n", `unknown field "spec.rings[0].soke"`},
		{"duplicate key", "    soak: 48h\n", "    soak: 48h\n    soak: 24h\n", `line 23: key "soak" already set in map`},
		{"duplicate cluster", "- name: prod-usw2\n", "- name: prod-use1\n", "spec.clusters[2].name: \"prod-use1\": cluster listed twice (also spec.clusters[1])"},
		{"bad label", "env: staging}", "env: 'not ok!'}", `spec.clusters[0].labels[env]`},
		{"bad label key", "{gpufleet.dev/ring: canary, env: staging}", "{gpufleet.dev/ring: canary, 'bad key': staging}", `spec.clusters[0].labels[bad key]`},
		{"bad soak", "soak: 48h", "soak: two days", `spec.rings[0].soak: "two days"`},
		{"bad zone", "America/Los_Angeles", "Mars/Olympus", `spec.windows[0].timeZone: "Mars/Olympus"`},
		{"bad cron", `"0 1 * * 1-5"`, `"0 1 * *"`, `spec.windows[0].schedule`},
		{"margin too long", "finishMargin: 15m", "finishMargin: 5h", `spec.windows[0].finishMargin`},
		{"bad kind", "kind: Fleet", "kind: Fleat", `kind: "Fleat": want Fleet`},
		{"bad version", "version: v1.38", "version: latest", `spec.target.version`},
		{"bad check", "check: verify-regressions", "check: vibes", `spec.haltOn[0].check: "vibes": supported values: "alerts", "apiserver-429-rate"`},
		{"alerts without URL", "{check: verify-regressions}", "{check: alerts, matchers: ['severity=\"critical\"']}", `spec.haltOn[0].alertmanagerURL: required: the Alertmanager`},
		{"alerts bad URL", "{check: verify-regressions}", "{check: alerts, alertmanagerURL: 'alertmanager:9093'}", `spec.haltOn[0].alertmanagerURL: "alertmanager:9093": want http(s)://`},
		{"promql without URL", "{check: verify-regressions}", "{check: promql, queries: [{name: up, expr: up, min: 1}]}", `spec.haltOn[0].prometheusURL: required: the Prometheus`},
		{"promql bad URL", "{check: verify-regressions}", "{check: promql, prometheusURL: 'prom:9090', queries: [{name: up, expr: up, min: 1}]}", `spec.haltOn[0].prometheusURL: "prom:9090": want http(s)://`},
		{"promql without queries", "{check: verify-regressions}", "{check: promql, prometheusURL: 'http://prom:9090'}", `spec.haltOn[0].queries: required`},
		{"promql no bound", "{check: verify-regressions}", "{check: promql, prometheusURL: 'http://prom:9090', queries: [{name: up, expr: up}]}", `spec.haltOn[0].queries[0]: "up": check "up": give exactly one of maxRatio, minRatio, max or min, got 0`},
		{"promql same name", "{check: verify-regressions}", "{check: promql, prometheusURL: 'http://prom:9090', queries: [{name: up, expr: up, min: 1}, {name: up, expr: up, max: 2}]}", `spec.haltOn[0].queries[1].name: duplicate value up`},
		{"two promql", "{check: verify-regressions}", "{check: promql, prometheusURL: 'http://a:9090', queries: [{name: up, expr: up, min: 1}]}\n  - {check: promql, prometheusURL: 'http://b:9090', queries: [{name: up, expr: up, min: 1}]}", `spec.haltOn[1].check: duplicate value promql`},
		{"promql unknown field", "{check: verify-regressions}", "{check: promql, prometheusURL: 'http://prom:9090', queries: [{name: up, expr: up, maximum: 1}]}", `unknown field "spec.haltOn[0].queries[0].maximum"`},
		{"alerts bad cluster label", "{check: verify-regressions}", "{check: alerts, alertmanagerURL: 'http://am:9093', clusterLabel: 'not a label'}", `spec.haltOn[0].clusterLabel`},
		{"two actions", "      clusterAPI: {managementContext: mgmt, namespace: fleet}\n", "      clusterAPI: {managementContext: mgmt, namespace: fleet}\n      manual: {}\n", `spec.upgrade.actions[0]: set exactly one of clusterAPI, command, manual`},
		{"bad store", `"s3://gpufleet-state/prod"`, `"ftp://x"`, `spec.store.url`},
		{"bad selector", "{matchLabels: {gpufleet.dev/ring: canary}}", "{matchExpressions: [{key: a, operator: Near}]}", `spec.rings[0].selector`},
		{"wrong type", "maxConcurrent: 2", "maxConcurrent: two", `maxConcurrent`},
		{"bad freeze", `start: "2026-12-20"`, `start: "next week"`, `spec.freezes[0].start`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("fixture lacks %q", tc.old)
			}
			_, err := Load([]byte(strings.Replace(good, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("loaded a bad file")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q\nwant it to contain %q", msg, tc.want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is more than one line: %q", msg)
			}
		})
	}
}

func TestLoadFileNamesFile(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml"))
	if err == nil || !strings.Contains(err.Error(), "missing.yaml: cannot read the fleet file: no such file or directory") {
		t.Fatalf("err = %v", err)
	}
	p := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), "empty.yaml: the file is empty") {
		t.Fatalf("err = %v", err)
	}
}

// TestClusterDrainOverrideValidated: a cluster's own drain settings are
// checked like the fleet's.
func TestClusterDrainOverrideValidated(t *testing.T) {
	errs := validateClusters(field.NewPath("spec", "clusters"), []Cluster{{Name: "a", Drain: &Drain{EvictionTimeout: "ten minutes", OnTimeout: "later"}}})
	got := errs.ToAggregate().Error()
	for _, want := range []string{"spec.clusters[0].drain.evictionTimeout", "spec.clusters[0].drain.onTimeout"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q lack %s", got, want)
		}
	}
}
