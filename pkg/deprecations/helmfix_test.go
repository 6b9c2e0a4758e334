package deprecations

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

const pdbV1beta1 = `---
# Source: app/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: nginx}]
---
# Source: app/templates/pdb.yaml
apiVersion: policy/v1beta1   # old
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
`

func testMapper(t *testing.T, target string, includeDeprecated bool) *manifestMapper {
	t.Helper()
	r, err := apilifecycle.ParseRelease(target)
	if err != nil {
		t.Fatal(err)
	}
	return newManifestMapper(apilifecycle.Builtin(), r, includeDeprecated, nil, BuiltinFieldRules())
}

func TestMapManifestRewritesOnlyTheAPIVersionLine(t *testing.T) {
	m := testMapper(t, "v1.37", false)
	out, changes, manual := m.mapManifest("manifest", pdbV1beta1)
	if len(manual) != 0 {
		t.Fatalf("manual = %+v", manual)
	}
	want := strings.Replace(pdbV1beta1, "apiVersion: policy/v1beta1   # old\n", "apiVersion: policy/v1\n", 1)
	if out != want {
		t.Fatalf("rewritten manifest:\n%s\nwant:\n%s", out, want)
	}
	if len(changes) != 1 || changes[0].Kind != "PodDisruptionBudget" || changes[0].Name != "web" ||
		changes[0].APIVersion != "policy/v1beta1" || changes[0].NewAPIVersion != "policy/v1" || changes[0].Status != "removed" || changes[0].RemovedIn != "v1.25" {
		t.Fatalf("changes = %+v", changes)
	}
	// Mapped again, nothing changes.
	again, ch2, _ := m.mapManifest("manifest", out)
	if again != out || len(ch2) != 0 {
		t.Fatalf("second mapping changed %v", ch2)
	}
}

func TestMapManifestTarget(t *testing.T) {
	// policy/v1beta1 was removed in 1.25: at 1.24 it is deprecated only.
	m := testMapper(t, "v1.24", false)
	if out, ch, _ := m.mapManifest("manifest", pdbV1beta1); out != pdbV1beta1 || len(ch) != 0 {
		t.Fatalf("deprecated API mapped without --include-deprecated: %v", ch)
	}
	m = testMapper(t, "v1.24", true)
	if _, ch, _ := m.mapManifest("manifest", pdbV1beta1); len(ch) != 1 || ch[0].Status != "deprecated" {
		t.Fatalf("with --include-deprecated: %+v", ch)
	}
}

func TestMapManifestNeedsFieldChange(t *testing.T) {
	m := testMapper(t, "v1.37", false)
	cases := []struct {
		name, doc string
		manual    bool
		want      string
	}{
		{"ingress with serviceName", `apiVersion: extensions/v1beta1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - http:
      paths:
      - path: /
        backend: {serviceName: web, servicePort: 80}
`, true, "has spec.rules[].http.paths[].backend.serviceName"},
		{"ingress already in the v1 shape", `apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: web, port: {number: 80}}}
`, false, ""},
		{"deployment without selector", `apiVersion: extensions/v1beta1
kind: Deployment
metadata: {name: web}
spec:
  template: {metadata: {labels: {app: web}}}
`, true, "lacks spec.selector"},
		{"crd", `apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata: {name: foos.example.com}
`, true, "every object"},
		{"psp has no replacement", `apiVersion: policy/v1beta1
kind: PodSecurityPolicy
metadata: {name: restricted}
`, true, "has no replacement"},
		{"hpa v2beta2", `apiVersion: autoscaling/v2beta2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec: {maxReplicas: 3, metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]}
`, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, ch, mn := m.mapManifest("manifest", c.doc)
			if c.manual {
				if len(mn) != 1 || len(ch) != 0 || out != c.doc || !strings.Contains(mn[0].Reason, c.want) || mn[0].Change == "" {
					t.Fatalf("want a chart change (%s), got changes %+v manual %+v", c.want, ch, mn)
				}
				return
			}
			if len(mn) != 0 || len(ch) != 1 || out == c.doc {
				t.Fatalf("want a pure mapping, got changes %+v manual %+v", ch, mn)
			}
		})
	}
}

func TestMapManifestReplacementNotServed(t *testing.T) {
	r, _ := apilifecycle.ParseRelease("v1.25")
	m := newManifestMapper(apilifecycle.Builtin(), r, false, func(gv, kind string) bool { return gv != "policy/v1" }, BuiltinFieldRules())
	_, ch, mn := m.mapManifest("manifest", pdbV1beta1)
	if len(ch) != 0 || len(mn) != 1 || !strings.Contains(mn[0].Reason, "does not serve policy/v1") {
		t.Fatalf("changes %+v manual %+v", ch, mn)
	}
}

func TestFieldRulesNameKnownAPIs(t *testing.T) {
	fr := BuiltinFieldRules()
	if fr.Source == "" || len(fr.Rules) == 0 {
		t.Fatal("no field rules")
	}
	for _, r := range fr.Rules {
		for _, av := range r.APIVersions {
			e, ok := apilifecycle.Builtin().Lookup(av, r.Kind)
			if !ok {
				t.Errorf("rule for %s %s: not in the lifecycle table", av, r.Kind)
				continue
			}
			if e.Removed.IsZero() && e.Deprecated.IsZero() {
				t.Errorf("rule for %s %s: the API is neither deprecated nor removed", av, r.Kind)
			}
		}
		if r.Change == "" || (!r.Always && len(r.MustHave)+len(r.MustNotHave) == 0) {
			t.Errorf("rule for %v %s says nothing", r.APIVersions, r.Kind)
		}
	}
}

// plant stores a release history through Helm's own driver: revisions
// 1..n-1 superseded, n deployed; manifests[i] is revision i+1's. Each
// revision has a hook PDB, in policy/v1beta1 when its manifest uses it.
func plant(t *testing.T, d driver.Driver, ns, name string, manifests ...string) {
	t.Helper()
	for i, m := range manifests {
		st := common.StatusSuperseded
		if i == len(manifests)-1 {
			st = common.StatusDeployed
		}
		hookAPI := "policy/v1"
		if strings.Contains(m, "policy/v1beta1") {
			hookAPI = "policy/v1beta1"
		}
		first := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
		rel := &rspb.Release{
			Name: name, Namespace: ns, Version: i + 1, Manifest: m,
			Info:   &rspb.Info{Status: st, FirstDeployed: first, LastDeployed: first.Add(time.Duration(i) * time.Hour), Description: "Upgrade complete", Notes: "thanks"},
			Chart:  &chart.Chart{Metadata: &chart.Metadata{Name: "app", Version: fmt.Sprintf("0.%d.0", i+1), APIVersion: "v2"}},
			Config: map[string]any{"replicas": float64(2)},
			Hooks: []*rspb.Hook{{Name: name + "-test", Kind: "PodDisruptionBudget", Path: "app/templates/hook.yaml",
				Manifest: "apiVersion: " + hookAPI + "\nkind: PodDisruptionBudget\nmetadata:\n  name: hook\n", Events: []rspb.HookEvent{rspb.HookPostInstall}}},
			Labels: map[string]string{"team": "ml"},
		}
		if err := d.Create(releaseKey(name, i+1), rel); err != nil {
			t.Fatal(err)
		}
	}
}

func history(t *testing.T, d driver.Driver, name string) []*rspb.Release {
	t.Helper()
	rels, err := d.Query(map[string]string{"name": name, "owner": "helm"})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*rspb.Release, len(rels)+1)
	for _, r := range rels {
		rel := r.(*rspb.Release)
		if rel.Version >= len(out) {
			t.Fatalf("revision %d of %d records", rel.Version, len(rels))
		}
		out[rel.Version] = rel
	}
	return out[1:]
}

func testFixer(kc *fake.Clientset, ns string) *HelmFixer {
	return &HelmFixer{Kube: kc, Table: apilifecycle.Builtin(), Target: apilifecycle.R(1, 37), Namespace: ns}
}

func TestHelmFixWritesANewRevision(t *testing.T) {
	for _, storage := range []string{"Secret", "ConfigMap"} {
		t.Run(storage, func(t *testing.T) {
			kc := fake.NewClientset()
			h := testFixer(kc, "apps")
			d := h.driver(storage, "apps").(driver.Driver)
			old := strings.Replace(pdbV1beta1, "nginx", "nginx:1.0", 1)
			plant(t, d, "apps", "web", old, pdbV1beta1)
			res, err := h.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Items) != 1 || res.Items[0].Action != HelmFixFixed || res.Items[0].Revision != 2 || res.Items[0].NewRevision != 3 || res.Items[0].Storage != storage {
				t.Fatalf("items = %+v", res.Items)
			}
			if n := len(res.Items[0].Changes); n != 2 {
				t.Fatalf("want the manifest's and the hook's PDB mapped, got %+v", res.Items[0].Changes)
			}
			hist := history(t, d, "web")
			if len(hist) != 3 {
				t.Fatalf("%d revisions", len(hist))
			}
			if hist[0].Info.Status != common.StatusSuperseded || hist[0].Manifest != old {
				t.Errorf("revision 1 changed: %s", hist[0].Info.Status)
			}
			if hist[1].Info.Status != common.StatusSuperseded || hist[1].Manifest != pdbV1beta1 {
				t.Errorf("revision 2: status %s, manifest changed %v", hist[1].Info.Status, hist[1].Manifest != pdbV1beta1)
			}
			r3 := hist[2]
			if r3.Info.Status != common.StatusDeployed || strings.Contains(r3.Manifest, "v1beta1") || !strings.Contains(r3.Manifest, "apiVersion: policy/v1\n") {
				t.Errorf("revision 3: %s\n%s", r3.Info.Status, r3.Manifest)
			}
			if r3.Hooks[0].Manifest != "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: hook\n" || r3.Hooks[0].Events[0] != rspb.HookPostInstall {
				t.Errorf("hook: %+v", r3.Hooks[0])
			}
			if r3.Chart.Metadata.Version != "0.2.0" || r3.Config["replicas"] != float64(2) || r3.Info.Notes != "thanks" ||
				!r3.Info.FirstDeployed.Equal(hist[1].Info.FirstDeployed) || !strings.Contains(r3.Info.Description, "policy/v1beta1 PodDisruptionBudget -> policy/v1") {
				t.Errorf("revision 3 lost what revision 2 held: %+v %+v", r3.Info, r3.Chart.Metadata)
			}
			if r3.Labels["team"] != "ml" || r3.Labels["status"] != "deployed" || r3.Labels["version"] != "3" || r3.Labels["modifiedAt"] != "" {
				t.Errorf("labels of revision 3: %v", r3.Labels)
			}
			// A second run has nothing to do.
			writes := len(kc.Actions())
			res, err = h.Run(context.Background())
			if err != nil || res.Items[0].Action != HelmFixUpToDate {
				t.Fatalf("second run: %v %+v", err, res.Items)
			}
			for _, a := range kc.Actions()[writes:] {
				if a.GetVerb() != "list" {
					t.Errorf("second run wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

func TestHelmFixResumesAfterTheFirstWrite(t *testing.T) {
	kc := fake.NewClientset()
	h := testFixer(kc, "")
	d := h.driver("Secret", "apps").(driver.Driver)
	plant(t, d, "apps", "web", pdbV1beta1)
	stop := errors.New("stopped")
	h.AfterCreate = func(HelmFix) error { return stop }
	res, err := h.Run(context.Background())
	if !errors.Is(err, stop) || res.Items[0].Action != HelmFixFailed {
		t.Fatalf("run = %v %+v", err, res.Items)
	}
	hist := history(t, d, "web")
	if len(hist) != 2 || hist[0].Info.Status != common.StatusDeployed || hist[1].Info.Status != common.StatusDeployed {
		t.Fatalf("after the first write: %d revisions", len(hist))
	}
	// A dry run says what is left, and writes nothing.
	h.AfterCreate, h.DryRun = nil, true
	res, err = h.Run(context.Background())
	if err != nil || res.Items[0].Action != HelmFixPlanned || res.Items[0].NewRevision != 2 {
		t.Fatalf("dry run = %v %+v", err, res.Items)
	}
	h.DryRun = false
	res, err = h.Run(context.Background())
	if err != nil || res.Items[0].Action != HelmFixFinished || res.Items[0].Revision != 1 || res.Items[0].NewRevision != 2 {
		t.Fatalf("re-run = %v %+v", err, res.Items)
	}
	hist = history(t, d, "web")
	if len(hist) != 2 || hist[0].Info.Status != common.StatusSuperseded || hist[1].Info.Status != common.StatusDeployed {
		t.Fatalf("after the re-run: %d revisions, %s %s", len(hist), hist[0].Info.Status, hist[len(hist)-1].Info.Status)
	}
}

func TestHelmFixLeavesInconsistentHistoriesAlone(t *testing.T) {
	kc := fake.NewClientset()
	h := testFixer(kc, "apps")
	d := h.driver("Secret", "apps").(driver.Driver)
	plant(t, d, "apps", "web", pdbV1beta1)
	// A second deployed revision that is not fix-helm's doing.
	other := strings.Replace(pdbV1beta1, "policy/v1beta1   # old", "policy/v1", 1)
	other = strings.Replace(other, "minAvailable: 1", "minAvailable: 2", 1)
	rel := history(t, d, "web")[0]
	rel.Version, rel.Manifest = 2, other
	rel.Labels = nil
	if err := d.Create(releaseKey("web", 2), rel); err != nil {
		t.Fatal(err)
	}
	before := len(kc.Actions())
	res, err := h.Run(context.Background())
	if err != nil || res.Items[0].Action != HelmFixSkipped || !strings.Contains(res.Items[0].Detail, "not what fix-helm writes") {
		t.Fatalf("run = %v %+v", err, res.Items)
	}
	for _, a := range kc.Actions()[before:] {
		if a.GetVerb() != "list" {
			t.Errorf("wrote: %s", a.GetVerb())
		}
	}
}

func TestHelmFixDryRunAndManual(t *testing.T) {
	kc := fake.NewClientset()
	h := testFixer(kc, "apps")
	d := h.driver("Secret", "apps").(driver.Driver)
	plant(t, d, "apps", "web", pdbV1beta1)
	plant(t, d, "apps", "legacy", "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: legacy}\nspec:\n  backend: {serviceName: legacy, servicePort: 80}\n")
	plant(t, d, "apps", "current", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: current}\n")
	h.DryRun = true
	before := len(kc.Actions())
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]HelmFix{}
	for _, it := range res.Items {
		got[it.Release] = it
	}
	if got["web"].Action != HelmFixPlanned || !strings.Contains(got["web"].Diff, "-apiVersion: policy/v1beta1   # old\n+apiVersion: policy/v1\n") ||
		!strings.Contains(got["web"].Diff, "--- apps/web revision 1 manifest\n+++ apps/web revision 2 manifest\n") {
		t.Errorf("web: %+v\n%s", got["web"], got["web"].Diff)
	}
	if l := got["legacy"]; l.Action != HelmFixNeedsChart || len(l.NeedsChange) != 1 || !strings.Contains(l.NeedsChange[0].Change, "defaultBackend") {
		t.Errorf("legacy: %+v", l)
	}
	if got["current"].Action != HelmFixUpToDate {
		t.Errorf("current: %+v", got["current"])
	}
	for _, a := range kc.Actions()[before:] {
		if a.GetVerb() != "list" {
			t.Errorf("dry run wrote: %s", a.GetVerb())
		}
	}
	// Without --dry-run the manual release is still left alone.
	h.DryRun = false
	if _, err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(history(t, d, "legacy")); n != 1 {
		t.Errorf("legacy has %d revisions", n)
	}
}

func TestHelmFixNamedReleases(t *testing.T) {
	kc := fake.NewClientset()
	h := testFixer(kc, "apps")
	d := h.driver("Secret", "apps").(driver.Driver)
	plant(t, d, "apps", "web", pdbV1beta1)
	plant(t, d, "apps", "api", pdbV1beta1)
	h.Releases = []string{"web", "nope"}
	before := len(kc.Actions())
	_, err := h.Run(context.Background())
	var nf *HelmReleaseNotFoundError
	if !errors.As(err, &nf) || nf.Names[0] != "nope" {
		t.Fatalf("err = %v", err)
	}
	for _, a := range kc.Actions()[before:] {
		if a.GetVerb() != "list" {
			t.Errorf("wrote before failing: %s", a.GetVerb())
		}
	}
	h.Releases = []string{"web"}
	res, err := h.Run(context.Background())
	if err != nil || len(res.Items) != 1 || res.Items[0].Release != "web" || res.Items[0].Action != HelmFixFixed {
		t.Fatalf("%v %+v", err, res.Items)
	}
	if n := len(history(t, d, "api")); n != 1 {
		t.Errorf("api has %d revisions", n)
	}
}

func TestHelmFixForbiddenUpdate(t *testing.T) {
	kc := fake.NewClientset()
	h := testFixer(kc, "apps")
	d := h.driver("Secret", "apps").(driver.Driver)
	plant(t, d, "apps", "web", pdbV1beta1)
	kc.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no"))
	})
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	it := res.Items[0]
	if it.Action != HelmFixFailed || !it.Forbidden || !strings.Contains(it.Error, "marking revision 1 superseded") {
		t.Fatalf("%+v", it)
	}
}

// TestHelmFixReadsHelm3Records plants a record the way Helm 3 stored it:
// Helm 3's time type wrote a zero time as "" (helm.sh/helm/v3 pkg/time),
// which Helm 4's release types read as zero (pkg/release/v1 info.go and
// hook.go, "handles empty string time fields"), and Helm 3 set no
// createdAt label. The fix reads it and writes a revision Helm reads back.
func TestHelmFixReadsHelm3Records(t *testing.T) {
	rec := map[string]any{
		"name": "old", "namespace": "apps", "version": 1,
		"info": map[string]any{"first_deployed": "2022-03-01T10:00:00.123456789Z", "last_deployed": "2022-03-01T10:00:00.123456789Z",
			"deleted": "", "description": "Install complete", "status": "deployed", "notes": "hello"},
		"chart": map[string]any{
			"metadata":  map[string]any{"name": "app", "version": "1.2.3", "apiVersion": "v2", "appVersion": "4.5"},
			"lock":      nil,
			"templates": []any{map[string]any{"name": "templates/pdb.yaml", "data": base64.StdEncoding.EncodeToString([]byte("apiVersion: policy/v1beta1\n"))}},
			"values":    map[string]any{"replicas": 1},
			"schema":    nil,
			"files":     []any{},
		},
		"config":   map[string]any{"replicas": 3},
		"manifest": pdbV1beta1,
		"hooks": []any{map[string]any{"name": "smoke", "kind": "Pod", "path": "app/templates/smoke.yaml",
			"manifest": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n", "events": []any{"test"},
			"last_run": map[string]any{"started_at": "", "completed_at": "", "phase": ""}}},
	}
	js, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(js)
	_ = zw.Close()
	kc := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.old.v1", Namespace: "apps",
			Labels: map[string]string{"name": "old", "owner": "helm", "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))},
	})
	h := testFixer(kc, "apps")
	res, err := h.Run(context.Background())
	if err != nil || len(res.Items) != 1 || res.Items[0].Action != HelmFixFixed {
		t.Fatalf("%v %+v", err, res.Items)
	}
	hist := history(t, h.driver("Secret", "apps").(driver.Driver), "old")
	r2 := hist[1]
	if r2.Info.Status != common.StatusDeployed || !strings.Contains(r2.Manifest, "apiVersion: policy/v1\n") || r2.Info.Notes != "hello" ||
		r2.Info.FirstDeployed.Format(time.RFC3339Nano) != "2022-03-01T10:00:00.123456789Z" || !r2.Info.Deleted.IsZero() ||
		r2.Chart.Metadata.AppVersion != "4.5" || len(r2.Chart.Templates) != 1 || r2.Config["replicas"] != float64(3) || r2.Hooks[0].Events[0] != "test" {
		t.Fatalf("revision 2: %+v %+v", r2.Info, r2.Chart.Metadata)
	}
	if hist[0].Info.Status != common.StatusSuperseded || hist[0].Manifest != pdbV1beta1 || hist[0].Info.Description != "Install complete" {
		t.Fatalf("revision 1: %+v", hist[0].Info)
	}
}
