package deprecations

import (
	"context"
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/kubernetes/fake"
)

// TestHelmReaderDecodedCharts: records written by Helm's own Secrets and
// ConfigMaps drivers come back in Decoded with their chart's name,
// version and appVersion (kyverno's chart 3.x installs Kyverno 1.x), the
// deployed revision only and without the manifest text.
func TestHelmReaderDecodedCharts(t *testing.T) {
	cs := fake.NewClientset()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	store := func(d driver.Driver, ns, name string, rev int, st common.Status, md chart.Metadata) {
		t.Helper()
		md.APIVersion = "v2"
		rel := &rspb.Release{Name: name, Namespace: ns, Version: rev, Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			Info:  &rspb.Info{Status: st, FirstDeployed: at, LastDeployed: at},
			Chart: &chart.Chart{Metadata: &md}}
		if err := d.Create(releaseKey(name, rev), rel); err != nil {
			t.Fatal(err)
		}
	}
	sec := driver.NewSecrets(cs.CoreV1().Secrets("kyverno"))
	store(sec, "kyverno", "kyverno", 1, common.StatusSuperseded, chart.Metadata{Name: "kyverno", Version: "3.4.0", AppVersion: "v1.14.0"})
	store(sec, "kyverno", "kyverno", 2, common.StatusDeployed, chart.Metadata{Name: "kyverno", Version: "3.5.1", AppVersion: "v1.15.1"})
	cms := driver.NewConfigMaps(cs.CoreV1().ConfigMaps("gpu-operator"))
	store(cms, "gpu-operator", "gpu-operator", 1, common.StatusDeployed, chart.Metadata{Name: "gpu-operator", Version: "v25.10.1", AppVersion: "v25.10.1"})

	res, err := (&HelmReader{Kube: cs, Scanner: &ManifestScanner{}}).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]HelmRelease{}
	for _, r := range res.Decoded {
		got[r.Namespace+"/"+r.Name] = r
	}
	k, g := got["kyverno/kyverno"], got["gpu-operator/gpu-operator"]
	if len(res.Decoded) != 2 || k.Chart != "kyverno" || k.ChartVersion != "3.5.1" || k.AppVersion != "v1.15.1" || k.Revision != 2 || k.Status != "deployed" ||
		g.Chart != "gpu-operator" || g.AppVersion != "v25.10.1" || g.Status != "deployed" {
		t.Fatalf("decoded %+v", res.Decoded)
	}
	for _, r := range res.Decoded {
		if r.Manifests != nil {
			t.Errorf("%s/%s: Decoded keeps the manifest text", r.Namespace, r.Name)
		}
	}
}
