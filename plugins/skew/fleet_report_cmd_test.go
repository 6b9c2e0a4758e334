package skew

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport"
)

func fleetGetter() *cli.TestClientGetter {
	return &cli.TestClientGetter{Meta: cli.Metadata{Context: "prod"}, PerContext: map[string]*cli.TestClientGetter{
		"prod": getter(cluster("https://prod:6443")),
	}}
}

func writeFleet(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInventoryCommand(t *testing.T) {
	fleet := writeFleet(t, `apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: f}
spec:
  clusters:
  - {name: prod-a, context: prod, labels: {gpufleet.dev/ring: prod}}
  - {name: lost, context: nowhere, labels: {gpufleet.dev/ring: prod}}
`)
	r := run(t, fleetGetter(), "", "fleet", "inventory", "-f", fleet, "-o", "json")
	if r.Code != cli.ExitUsage {
		t.Errorf("exit %d, want 2 (a context not in the kubeconfig)\n%s", r.Code, r.Err)
	}
	var rep fleetreport.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Out)
	}
	if len(rep.Clusters) != 2 || rep.Clusters[0].Error != "" || rep.Clusters[0].Version != "v1.37.2" || rep.Clusters[0].Ring != "prod" {
		t.Errorf("rows: %+v", rep.Clusters)
	}
	// The kubectl on this machine does not count in a cluster's skew.
	if rep.Clusters[0].MaxSkew != 4 {
		t.Errorf("max skew %d, want 4 (kubelet 1.33 under apiserver 1.37)", rep.Clusters[0].MaxSkew)
	}
	if !strings.Contains(r.Err, `error: cluster lost: context "nowhere" is not in the kubeconfig`) {
		t.Errorf("stderr does not name the lost cluster:\n%s", r.Err)
	}
	r = run(t, fleetGetter(), "", "fleet", "inventory", "-f", fleet)
	for _, want := range []string{"CLUSTER", "prod-a", "v1.37.2", "lost", "ERROR"} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("table lacks %q:\n%s", want, r.Out)
		}
	}
	goldenfile.CheckFits(t, r.Out, cli.DefaultTableWidth)
	// Each pool's kubelets and the error show in -o wide.
	r = run(t, fleetGetter(), "", "fleet", "inventory", "-f", fleet, "-o", "wide")
	for _, want := range []string{"PROVIDER", "LATEST-PATCH", "SUPPORT-ENDS", "h100-a=v1.37.2", `context "nowhere" is not in the kubeconfig`} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("wide table lacks %q:\n%s", want, r.Out)
		}
	}
	r = run(t, fleetGetter(), "", "fleet", "inventory", "--contexts", "prod", "-o", "prometheus")
	if r.Code != 0 || !strings.Contains(r.Out, `gpufleet_cluster_up{cluster="prod",ring=""} 1.0`) || !strings.HasSuffix(r.Out, "# EOF\n") {
		t.Errorf("prometheus output: exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}
}

func TestInventoryBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
		// code is 3 for a file that cannot be read or used (README's exit
		// codes: an input file), 2 for a usage error.
		code int
	}{
		{"no clusters", nil, "name the clusters: -f FLEET.yaml, --contexts A,B or --all-contexts", 2},
		{"malformed fleet file", []string{"-f", writeFleet(t, "apiVersion: gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  clusters:\n  - {name: a, contxt: b}\n")},
			`unknown field "spec.clusters[0].contxt"`, 3},
		{"duplicate cluster", []string{"-f", writeFleet(t, "apiVersion: gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  clusters:\n  - {name: a}\n  - {name: a}\n")},
			"spec.clusters[1].name", 3},
		{"missing fleet file", []string{"-f", "/nonexistent/fleet.yaml"}, "cannot read the fleet file", 3},
		{"both", []string{"-f", writeFleet(t, "apiVersion: gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  clusters:\n  - {name: a}\n"), "--all-contexts"},
			"-f cannot be combined with --contexts or --all-contexts", 2},
		{"bad push", []string{"--all-contexts", "--push", "pushgateway:9091"}, "want an http:// or https:// Pushgateway URL", 2},
		{"bad store", []string{"--all-contexts", "--store", "ftp://x"}, "want file:///path, s3://bucket/prefix", 2},
		{"bad patches", []string{"--all-contexts", "--patches", writeFleet(t, "dataDate: x\n")}, "--patches", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, fleetGetter(), "", append([]string{"fleet", "inventory"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(r.Err), "\n")
			want := tc.code
			if r.Code != want || len(lines) != 1 || !strings.Contains(r.Err, tc.want) || r.Out != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d and one line with %q", r.Code, r.Err, r.Out, want, tc.want)
			}
		})
	}
}
