//go:build e2e

package deprecationse2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

const binary = "kubectl-deprecations"

type item struct {
	Source      string `json:"source"`
	Location    string `json:"location"`
	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind"`
	Resource    string `json:"resource"`
	Name        string `json:"name"`
	Who         string `json:"who"`
	UserAgent   string `json:"userAgent"`
	Verb        string `json:"verb"`
	Count       int64  `json:"count"`
	Status      string `json:"status"`
	Severity    string `json:"severity"`
	Detail      string `json:"detail"`
	Hint        string `json:"hint"`
	Removed     string `json:"removed"`
	Replacement string `json:"replacement"`
}

type report struct {
	Kind          string `json:"kind"`
	TargetVersion string `json:"target"`
	Metadata      struct {
		ServerVersion string `json:"serverVersion"`
	} `json:"metadata"`
	Items   []item `json:"items"`
	Sources []struct {
		Name    string `json:"name"`
		Scanned string `json:"scanned"`
		Error   string `json:"error"`
	} `json:"sources"`
}

func run(t *testing.T, args ...string) (plugintest.Result, report) {
	t.Helper()
	res := plugintest.Run(t, binary, args...)
	var rep report
	if strings.Contains(strings.Join(args, " "), "-o json") {
		if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
			t.Fatalf("stdout is not a JSON report: %v\n%s", err, res)
		}
	}
	return res, rep
}

func find(items []item, match func(item) bool) *item {
	for i := range items {
		if match(items[i]) {
			return &items[i]
		}
	}
	return nil
}

// TestDeprecationsCallerThroughMetricAuditAndManagedFields: a client with
// a distinctive user agent lists resource.k8s.io/v1beta1 resourceslices and
// writes a DeviceClass through v1beta1. The plugin finds the call in the
// apiserver metric and, with the caller's user agent, in the real audit
// log, and the writer in the DeviceClass's managedFields.
func TestDeprecationsCallerThroughMetricAuditAndManagedFields(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	suffix := rand.String(6)
	agent := "legacy-dra-client/" + suffix
	manager := "legacy-dra-writer-" + suffix

	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent = agent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := cs.Discovery().RESTClient()
	if _, err := rc.Get().AbsPath("/apis/resource.k8s.io/v1beta1/resourceslices").DoRaw(ctx); err != nil {
		t.Fatalf("GET resourceslices v1beta1: %v", err)
	}
	className := "e2e-legacy-" + suffix
	// A label gives the manager fields to own: without any, the apiserver
	// records no managedFields entry.
	body := fmt.Sprintf(`{"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceClass","metadata":{"name":%q,"labels":{"team":"legacy"}},"spec":{}}`, className)
	if _, err := rc.Post().AbsPath("/apis/resource.k8s.io/v1beta1/deviceclasses").Param("fieldManager", manager).
		SetHeader("Content-Type", "application/json").Body([]byte(body)).DoRaw(ctx); err != nil {
		t.Fatalf("create DeviceClass through v1beta1: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.Client.ResourceV1().DeviceClasses().Delete(context.Background(), className, metav1.DeleteOptions{})
	})

	// The audit log backend writes as requests complete; wait until our
	// call is on disk.
	if err := harness.Eventually(ctx, "audit event of the legacy client", 30*time.Second, func(context.Context) (bool, error) {
		b, err := os.ReadFile(cp.AuditLogPath)
		return err == nil && bytes.Contains(b, []byte(agent)), nil
	}); err != nil {
		t.Fatal(err)
	}

	// Default target: the server's next minor (1.38), where v1beta1 is removed.
	res, rep := run(t, "--kubeconfig", cp.Kubeconfig, "--source", "metrics,audit,objects",
		"--audit-log", cp.AuditLogPath, "-o", "json")
	if res.ExitCode != 1 {
		t.Fatalf("want exit 1 (removed at the target)\n%s", res)
	}
	if rep.TargetVersion != "1.38" || !strings.HasPrefix(rep.Metadata.ServerVersion, "v1.37") {
		t.Errorf("target %s for server %s, want v1.38", rep.TargetVersion, rep.Metadata.ServerVersion)
	}
	for _, s := range rep.Sources {
		if s.Error != "" {
			t.Errorf("source %s failed: %s", s.Name, s.Error)
		}
	}
	m := find(rep.Items, func(i item) bool {
		return i.Source == "metrics" && i.APIVersion == "resource.k8s.io/v1beta1" && i.Resource == "resourceslices"
	})
	if m == nil {
		t.Errorf("metric series for resourceslices v1beta1 not reported\n%s", res.Stdout)
	} else if m.Status != "fail" || m.Severity != "blocking" || m.Removed != "1.38" {
		t.Errorf("metric item: %+v", *m)
	}
	a := find(rep.Items, func(i item) bool {
		return i.Source == "audit" && i.UserAgent == agent && i.Resource == "resourceslices" && i.Verb == "list"
	})
	if a == nil {
		t.Errorf("audit log caller %q not reported\n%s", agent, res.Stdout)
	} else if a.Count < 1 || a.Who == "" || a.APIVersion != "resource.k8s.io/v1beta1" {
		t.Errorf("audit item: %+v", *a)
	}
	w := find(rep.Items, func(i item) bool {
		return i.Source == "objects" && i.Who == manager && i.Kind == "DeviceClass" && i.Name == className
	})
	if w == nil {
		t.Errorf("managedFields writer %s not reported\n%s", manager, res)
	} else if w.APIVersion != "resource.k8s.io/v1beta1" || w.Status != "fail" {
		t.Errorf("objects item: %+v", *w)
	}

	// Two minors back the same API is only deprecated: a warning, exit 0.
	res, rep = run(t, "--kubeconfig", cp.Kubeconfig, "--source", "audit", "--audit-log", cp.AuditLogPath,
		"--target-version", "v1.36", "-o", "json")
	if res.ExitCode != 0 {
		t.Fatalf("want exit 0 for deprecated only\n%s", res)
	}
	if a := find(rep.Items, func(i item) bool { return i.UserAgent == agent }); a == nil || a.Status != "warn" || a.Severity != "warning" {
		t.Errorf("at v1.36 want a deprecated warning, got %+v", a)
	}

	// The table names the caller too: -o wide whole, the default table
	// within 120 columns (the caller shortened with the mark when long).
	res, _ = run(t, "--kubeconfig", cp.Kubeconfig, "--source", "audit", "--audit-log", cp.AuditLogPath, "--color", "never", "-o", "wide")
	if res.ExitCode != 1 || !strings.Contains(res.Stdout, agent) || !strings.Contains(res.Stdout, "FAIL") {
		t.Errorf("wide table output:\n%s", res)
	}
	res, _ = run(t, "--kubeconfig", cp.Kubeconfig, "--source", "audit", "--audit-log", cp.AuditLogPath, "--color", "never")
	if res.ExitCode != 1 || !strings.Contains(res.Stdout, "WHO") || !strings.Contains(res.Stdout, "FAIL") {
		t.Errorf("table output:\n%s", res)
	}
	for _, l := range strings.Split(strings.SplitN(res.Stdout, "\n\n", 2)[0], "\n") {
		if n := utf8.RuneCountInString(l); n > 120 {
			t.Errorf("table line of %d columns:\n%s", n, l)
		}
	}
}

func releaseRecord(t *testing.T, name, ns string, rev int, status, manifest string) []byte {
	t.Helper()
	rec := map[string]any{
		"name": name, "namespace": ns, "version": rev,
		"info":     map[string]any{"status": status},
		"chart":    map[string]any{"metadata": map[string]any{"name": "legacy-chart", "version": "1.2.3"}, "values": map[string]any{"adminPassword": "chart-default-secret"}},
		"config":   map[string]any{"adminPassword": "hunter2-do-not-print"},
		"manifest": manifest,
	}
	return encodeRelease(t, rec)
}

// TestDeprecationsHelmReleaseRecord: a Helm 3 release Secret built by hand
// (the deployed revision uses batch/v1beta1 CronJob, an older kept revision
// extensions/v1beta1 Ingress) is decoded; values never reach the output.
func TestDeprecationsHelmReleaseRecord(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	deployed := "---\n# Source: legacy-chart/templates/cronjob.yaml\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: nightly\nspec:\n  schedule: \"0 1 * * *\"\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"
	old := "---\napiVersion: extensions/v1beta1\nkind: Ingress\nmetadata:\n  name: web\n"
	for _, r := range []struct {
		rev      int
		status   string
		manifest string
	}{{3, "deployed", deployed}, {2, "superseded", old}} {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sh.helm.release.v1.legacy.v%d", r.rev), Namespace: ns,
				Labels: map[string]string{"name": "legacy", "owner": "helm", "status": r.status, "version": fmt.Sprint(r.rev)}},
			Type: "helm.sh/release.v1",
			Data: map[string][]byte{"release": releaseRecord(t, "legacy", ns, r.rev, r.status, r.manifest)},
		}
		if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A corrupt record is reported, not fatal: the rest is scanned, and the
	// exit code (3, over the findings' 1) says an input was not.
	bad := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.broken.v1", Namespace: ns,
			Labels: map[string]string{"name": "broken", "owner": "helm", "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("H4sI-not-really")},
	}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	res, rep := run(t, "--kubeconfig", cp.Kubeconfig, "-n", ns, "--source", "helm", "-o", "json")
	if res.ExitCode != 3 {
		t.Fatalf("want exit 3 (a record not scanned)\n%s", res)
	}
	c := find(rep.Items, func(i item) bool { return i.Source == "helm" && i.Kind == "CronJob" && i.APIVersion == "batch/v1beta1" })
	if c == nil {
		t.Fatalf("CronJob in the deployed revision not reported\n%s", res)
	}
	if c.Who != "helm release "+ns+"/legacy" || !strings.Contains(c.Location, "revision 3") || c.Replacement != "batch/v1 CronJob" {
		t.Errorf("helm item: %+v", *c)
	}
	if find(rep.Items, func(i item) bool { return i.Kind == "Ingress" }) != nil {
		t.Errorf("superseded revision reported without --helm-history\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "corrupt Helm release record") {
		t.Errorf("corrupt record not reported\n%s", res.Stdout)
	}
	for _, secret := range []string{"hunter2", "chart-default-secret"} {
		if strings.Contains(res.Stdout+res.Stderr, secret) {
			t.Errorf("output leaks release values (%s)", secret)
		}
	}

	res, rep = run(t, "--kubeconfig", cp.Kubeconfig, "-n", ns, "--source", "helm", "--helm-history", "-o", "json")
	if find(rep.Items, func(i item) bool { return i.Kind == "Ingress" && strings.Contains(i.Location, "revision 2") }) == nil {
		t.Errorf("--helm-history did not scan revision 2\n%s", res)
	}
}

// TestDeprecationsCRDStoredVersion: a CRD whose old version v1alpha1 is
// deprecated and no longer served, while status.storedVersions still
// lists it.
func TestDeprecationsCRDStoredVersion(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "dep" + rand.String(5) + ".e2e.gpufleet.dev"
	crd := harness.MultiVersionCRD(group, "Widget", "widgets", []string{"v1alpha1", "v1"}, "v1alpha1")
	if err := cp.ApplyCRDs(ctx, crd); err != nil {
		t.Fatal(err)
	}
	ext := cp.APIExtensions()
	t.Cleanup(func() {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	// Move storage to v1 and retire v1alpha1; storedVersions keeps it.
	if err := harness.Eventually(ctx, "CRD updated", 30*time.Second, func(ctx context.Context) (bool, error) {
		cur, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for i := range cur.Spec.Versions {
			v := &cur.Spec.Versions[i]
			v.Storage = v.Name == "v1"
			if v.Name == "v1alpha1" {
				v.Served = false
				v.Deprecated = true
				v.DeprecationWarning = ptr.To(group + "/v1alpha1 Widget is retired; use v1")
			}
		}
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	var cur *apiextensionsv1.CustomResourceDefinition
	if err := harness.Eventually(ctx, "storedVersions", 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		cur, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		return err == nil && len(cur.Status.StoredVersions) == 2, nil
	}); err != nil {
		t.Fatalf("%v: %v", err, cur.Status.StoredVersions)
	}

	res, rep := run(t, "--kubeconfig", cp.Kubeconfig, "--source", "crds", "-o", "json")
	if res.ExitCode != 1 {
		t.Fatalf("want exit 1 for a stored version no longer served\n%s", res)
	}
	st := find(rep.Items, func(i item) bool {
		return i.Source == "crds" && i.APIVersion == group+"/v1alpha1" && strings.Contains(i.Detail, "storedVersions")
	})
	if st == nil {
		t.Fatalf("stored version not reported\n%s", res.Stdout)
	}
	if st.Hint != "kubectl crd-migrate "+crd.Name || st.Status != "fail" || st.Kind != "Widget" {
		t.Errorf("stored-version item: %+v", *st)
	}
	if find(rep.Items, func(i item) bool {
		return i.APIVersion == group+"/v1alpha1" && strings.Contains(i.Detail, "retired; use v1")
	}) == nil {
		t.Errorf("deprecation warning not reported\n%s", res.Stdout)
	}
}

// TestDeprecationsFilesAndErrors: files need no cluster; an unreachable
// cluster is exit 3 and bad flags exit 2.
func TestDeprecationsFilesAndErrors(t *testing.T) {
	cp := harness.Shared(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/cj.yaml", []byte("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, rep := run(t, "--ci", "-f", dir, "-o", "json")
	if res.ExitCode != 1 || len(rep.Items) != 1 || rep.TargetVersion != "1.39" {
		t.Errorf("--ci: %s", res)
	}
	res = plugintest.RunCmd(t, plugintest.Binary(t, binary), plugintest.Cmd{
		Args: []string{"--kubeconfig", cp.Kubeconfig, "-f", "-", "--target-version", "+1", "-o", "json"}, Stdin: "kind: CronJob\napiVersion: batch/v1beta1\nmetadata: {name: b}\n"})
	if res.ExitCode != 1 || !strings.Contains(res.Stdout, `"target": "1.38"`) {
		t.Errorf("stdin with a relative target: %s", res)
	}
	res, _ = run(t, "-f", dir)
	if res.ExitCode != 2 || !strings.Contains(res.Stderr, "--target is required") {
		t.Errorf("files without a target: %s", res)
	}
	res, _ = run(t, "--kubeconfig", cp.Kubeconfig, "--server", "https://127.0.0.1:1", "--source", "crds")
	if res.ExitCode != 3 {
		t.Errorf("unreachable server: %s", res)
	}
	// Input that cannot be read, or holds nothing, is refused (exit 3)
	// before anything reaches stdout, the cluster's sources unread.
	res = plugintest.RunCmd(t, plugintest.Binary(t, binary), plugintest.Cmd{
		Args: []string{"--kubeconfig", cp.Kubeconfig, "--audit-log", "-"}, Stdin: ""})
	if res.ExitCode != 3 || res.Stdout != "" || !strings.Contains(res.Stderr, "error: --audit-log - (stdin): holds no audit event (0 lines read") {
		t.Errorf("empty audit stream: %s", res)
	}
	res, _ = run(t, "--kubeconfig", cp.Kubeconfig, "-f", dir+"/missing.yaml", "--target", "+1")
	if res.ExitCode != 3 || res.Stdout != "" || !strings.Contains(res.Stderr, "error: -f "+dir+"/missing.yaml: does not exist") {
		t.Errorf("missing file: %s", res)
	}
}

// The metrics source asks the apiserver for its one metric family
// (deprecations.MetricsPath): this kube-apiserver filters /metrics by
// name[] parameters, so the answer holds that family alone, not the
// megabytes of the whole exposition. An apiserver that ignores the
// parameters would fail here, and the plugin would still filter itself.
func TestDeprecationsMetricsScrapeFiltered(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc := cp.Client.Discovery().RESTClient()
	whole, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	one, err := rc.Get().AbsPath("/metrics").Param("name[]", dep.DeprecatedAPIsMetric).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(one)), "\n") {
		if l != "" && !strings.HasPrefix(l, dep.DeprecatedAPIsMetric) && !strings.HasPrefix(l, "# HELP "+dep.DeprecatedAPIsMetric+" ") && !strings.HasPrefix(l, "# TYPE "+dep.DeprecatedAPIsMetric+" ") {
			t.Fatalf("filtered /metrics has a line of another family: %q", l)
		}
	}
	if len(one)*100 > len(whole) {
		t.Errorf("filtered /metrics is %d bytes of the whole %d", len(one), len(whole))
	}
	t.Logf("/metrics: %d bytes whole, %d bytes for %s alone", len(whole), len(one), dep.DeprecatedAPIsMetric)
}
