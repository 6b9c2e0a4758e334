package deprecations

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

const fixHelmPDB = "---\n# Source: app/templates/pdb.yaml\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 1\n"

func fixHelmCluster(t *testing.T, releases map[string]string) (*cli.TestClientGetter, driver.Driver) {
	t.Helper()
	kc := fake.NewClientset()
	fd := kc.Discovery().(*fakediscovery.FakeDiscovery)
	fd.FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	fd.Resources = []*metav1.APIResourceList{{GroupVersion: "policy/v1", APIResources: []metav1.APIResource{
		{Name: "poddisruptionbudgets", Kind: "PodDisruptionBudget", Namespaced: true, Verbs: []string{"list"}}}},
		{GroupVersion: "batch/v1", APIResources: []metav1.APIResource{{Name: "cronjobs", Kind: "CronJob", Namespaced: true, Verbs: []string{"list"}}}},
		{GroupVersion: "autoscaling/v2", APIResources: []metav1.APIResource{
			{Name: "horizontalpodautoscalers", Kind: "HorizontalPodAutoscaler", Namespaced: true, Verbs: []string{"list"}}}}}
	d := driver.NewSecrets(kc.CoreV1().Secrets("apps"))
	for name, m := range releases {
		rel := &rspb.Release{Name: name, Namespace: "apps", Version: 1, Manifest: m, Info: &rspb.Info{Status: common.StatusDeployed}}
		if err := d.Create("sh.helm.release.v1."+name+".v1", rel); err != nil {
			t.Fatal(err)
		}
	}
	cg := cli.NewTestClientGetter().WithKube(kc)
	cg.NS, cg.NSExplicit = "apps", true
	return cg, d
}

func TestFixHelmDryRunThenFix(t *testing.T) {
	cg, d := fixHelmCluster(t, map[string]string{"web": fixHelmPDB})
	out, errOut, code := runCmd(t, cg, "", "fix-helm", "--dry-run", "--color", "never")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"--- apps/web revision 1 manifest\n+++ apps/web revision 2 manifest\n", "-apiVersion: policy/v1beta1\n+apiVersion: policy/v1\n",
		"NAMESPACE", "web", "1 -> 2", "planned", "PodDisruptionBudget web: policy/v1beta1 -> policy/v1"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if rels, _ := d.Query(map[string]string{"name": "web"}); len(rels) != 1 {
		t.Fatalf("dry run wrote: %d records", len(rels))
	}

	out, errOut, code = runCmd(t, cg, "", "fix-helm", "web", "-o", "json")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep FixHelmReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != "FixHelmReport" || rep.APIVersion != cli.APIVersionV1Alpha2 || rep.TargetVersion != "1.38" || rep.Summary.Fixed != 1 ||
		len(rep.Items) != 1 || rep.Items[0].Action != dep.HelmFixFixed || rep.Items[0].NewRevision != 2 {
		t.Fatalf("report: %s", out)
	}
	if rels, _ := d.Query(map[string]string{"name": "web", "status": "deployed"}); len(rels) != 1 || rels[0].(*rspb.Release).Version != 2 {
		t.Fatalf("deployed after the fix: %v", rels)
	}
}

func TestFixHelmExitCodes(t *testing.T) {
	ingress := "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: old}\nspec:\n  backend: {serviceName: old, servicePort: 80}\n"
	cg, _ := fixHelmCluster(t, map[string]string{"old": ingress})
	out, errOut, code := runCmd(t, cg, "", "fix-helm", "--color", "never")
	if code != cli.ExitFindings || !strings.Contains(out, "needs-chart-change") || !strings.Contains(errOut, "spec.defaultBackend") {
		t.Errorf("needs a chart change: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := runErr(cg, "fix-helm", "nope"); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "no Helm release nope in namespace apps") {
		t.Errorf("unknown release: %v", err)
	}
	if err := runErr(cg, "fix-helm", "-A"); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "not both") {
		t.Errorf("-n and -A: %v", err)
	}
	cg.NSExplicit = false
	if _, errOut, code = runCmd(t, cg, "", "fix-helm", "-A", "old"); code != cli.ExitUsage {
		t.Errorf("-A with names: exit %d\n%s", code, errOut)
	}
	if _, errOut, code = runCmd(t, cg, "", "fix-helm", "--target-version", "soon"); code != cli.ExitUsage {
		t.Errorf("bad target: exit %d\n%s", code, errOut)
	}
	if err := runErr(cg, "fix-helm", "--target", "v1.99"); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "ahead of the lifecycle data") {
		t.Errorf("target past the lifecycle data: %v (exit %d)", err, cli.ExitCode(err))
	}
}

func runErr(cg cli.ClientGetter, args ...string) error {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cg, streams)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(context.Background())
}

// TestFixHelmTable pins fix-helm's table for a release whose record
// changes several objects: the list of changes is shortened with the mark
// to fit 120 columns, and -o wide carries it whole.
func TestFixHelmTable(t *testing.T) {
	m := fixHelmPDB +
		"---\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: dcgm-exporter-nightly-gpu-health-report\nspec:\n  schedule: '0 3 * * *'\n" +
		"---\napiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: dcgm-exporter-gpu-telemetry-prod\n" +
		"---\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: dcgm-exporter-gpu-telemetry-prod\nspec:\n  minAvailable: 1\n"
	cg, _ := fixHelmCluster(t, map[string]string{"dcgm-exporter-gpu-telemetry-prod": m, "web": fixHelmPDB})
	out, errOut, code := runCmd(t, cg, "", "fix-helm", "--color", "never")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	golden(t, "fixhelm.table", out)
	goldenfile.CheckWidth(t, out, cli.DefaultTableWidth)
	if !strings.Contains(out, cli.ElisionMark) {
		t.Errorf("the long list of changes is not marked as shortened:\n%s", out)
	}
	cg, _ = fixHelmCluster(t, map[string]string{"dcgm-exporter-gpu-telemetry-prod": m, "web": fixHelmPDB})
	out, _, _ = runCmd(t, cg, "", "fix-helm", "--color", "never", "-o", "wide")
	golden(t, "fixhelm.wide", out)
	cg, _ = fixHelmCluster(t, map[string]string{"dcgm-exporter-gpu-telemetry-prod": m, "web": fixHelmPDB})
	js, _, _ := runCmd(t, cg, "", "fix-helm", "-o", "json")
	golden(t, "fixhelm.json", js)
	if strings.Contains(out, cli.ElisionMark) || !strings.Contains(out, "PodDisruptionBudget dcgm-exporter-gpu-telemetry-prod: policy/v1beta1 -> policy/v1") {
		t.Errorf("-o wide does not carry the changes whole:\n%s", out)
	}
}
