package deprecations

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

const auditLine = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"%s","stage":"%s","requestURI":"/apis/resource.k8s.io/v1beta1/resourceslices","verb":"%s","user":{"username":"%s"},"userAgent":"%s","objectRef":{"resource":"resourceslices","apiGroup":"resource.k8s.io","apiVersion":"v1beta1"},"requestReceivedTimestamp":"%s","stageTimestamp":"%s","annotations":{"k8s.io/deprecated":"true","k8s.io/removed-release":"1.38"}}`

func auditEventLine(id, stage, verb, user, agent, ts string) string {
	return strings.NewReplacer().Replace(sprintf(auditLine, id, stage, verb, user, agent, ts, ts))
}

func sprintf(format string, args ...any) string {
	var b strings.Builder
	i := 0
	for j := 0; j < len(format); j++ {
		if format[j] == '%' && j+1 < len(format) && format[j+1] == 's' {
			b.WriteString(args[i].(string))
			i++
			j++
			continue
		}
		b.WriteByte(format[j])
	}
	return b.String()
}

func TestAuditReader(t *testing.T) {
	lines := []string{
		auditEventLine("1", "RequestReceived", "list", "alice", "old-client/1.0", "2026-01-01T10:00:00Z"),
		auditEventLine("1", "ResponseComplete", "list", "alice", "old-client/1.0", "2026-01-01T10:00:00Z"),
		auditEventLine("2", "ResponseComplete", "list", "alice", "old-client/1.0", "2026-01-03T10:00:00Z"),
		auditEventLine("3", "ResponseComplete", "get", "bob", "kubectl/v1.30", "2026-01-02T10:00:00Z"),
		auditEventLine("4", "ResponseStarted", "watch", "bob", "controller", "2026-01-02T11:00:00Z"),
		auditEventLine("4", "ResponseComplete", "watch", "bob", "controller", "2026-01-02T12:00:00Z"),
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete","verb":"list","objectRef":{"resource":"pods","apiVersion":"v1"}}`,
		`this is not JSON`,
		`{"broken": "k8s.io/deprecated`,
		``,
	}
	in := strings.Join(lines, "\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(in))
	_ = zw.Close()
	dir := t.TempDir()
	plain, zipped := filepath.Join(dir, "audit.log"), filepath.Join(dir, "audit-1.log.gz")
	if err := os.WriteFile(plain, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zipped, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := (&AuditReader{}).Read(context.Background(), []string{plain, zipped}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Who, Agent, Verb string
		Count            int64
		First, Last      string
	}
	var got []row
	for _, f := range res.Findings {
		got = append(got, row{f.Who, f.UserAgent, f.Verb, f.Count, f.FirstSeen.Format(time.RFC3339), f.LastSeen.Format(time.RFC3339)})
		if f.APIVersion != "resource.k8s.io/v1beta1" || f.Resource != "resourceslices" || f.server.removed != "1.38" {
			t.Errorf("finding %+v", f)
		}
	}
	want := []row{
		{"alice", "old-client/1.0", "list", 4, "2026-01-01T10:00:00Z", "2026-01-03T10:00:00Z"},
		{"bob", "controller", "watch", 2, "2026-01-02T11:00:00Z", "2026-01-02T11:00:00Z"},
		{"bob", "kubectl/v1.30", "get", 2, "2026-01-02T10:00:00Z", "2026-01-02T10:00:00Z"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
	if len(res.Skipped) != 4 || res.Skipped[0].Line != 8 || res.Skipped[1].Line != 9 {
		t.Errorf("skipped %+v", res.Skipped)
	}
	if res.Lines != 18 {
		t.Errorf("lines %d", res.Lines)
	}
	// A line longer than the bound is reported, and the next one still read.
	long := `{"x":"` + strings.Repeat("a", 3000) + `"}` + "\n" + lines[2] + "\n"
	res, err = (&AuditReader{MaxLine: 1024}).ReadStream(context.Background(), "stdin", strings.NewReader(long))
	if err != nil || len(res.Findings) != 1 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "longer") {
		t.Errorf("long line: %v %+v %+v", err, res.Findings, res.Skipped)
	}
}

const metricsText = `# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="resource.k8s.io",removed_release="1.38",resource="resourceslices",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="",removed_release="",resource="endpoints",subresource="",version="v1"} 1
apiserver_requested_deprecated_apis{group="batch",removed_release="1.25",resource="cronjobs",subresource="status",version="v1beta1"} 0
# HELP other_metric broken {{{
other_metric{a="b" 12 garbage
`

func TestReadMetrics(t *testing.T) {
	fs, err := ReadMetrics(strings.NewReader(metricsText), "https://a:6443")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, f.APIVersion+" "+f.Resource+" "+f.server.removed+" "+f.Location)
	}
	want := []string{"resource.k8s.io/v1beta1 resourceslices 1.38 apiserver https://a:6443", "v1 endpoints  apiserver https://a:6443"}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
	if fs, err := ReadMetrics(strings.NewReader("# nothing\n"), "x"); err != nil || len(fs) != 0 {
		t.Errorf("empty: %v %v", fs, err)
	}
	if _, err := ReadMetrics(strings.NewReader("apiserver_requested_deprecated_apis{group=\"a\" 1\n"), "x"); err == nil {
		t.Error("broken series: want error")
	}
	fs, skipped, err := ScrapeMetrics(context.Background(), []MetricsSource{
		{Instance: "a", Fetch: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(metricsText)), nil }},
		{Instance: "b", Fetch: func(context.Context) (io.ReadCloser, error) { return nil, io.ErrUnexpectedEOF }},
	})
	if err != nil || len(fs) != 2 || len(skipped) != 1 {
		t.Errorf("scrape: %v %d %+v", err, len(fs), skipped)
	}
}

func TestCRDFindings(t *testing.T) {
	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextv1.CustomResourceDefinitionSpec{Group: "example.com", Names: apiextv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1", Served: false, Deprecated: true},
				{Name: "v1beta1", Served: true, Deprecated: true, DeprecationWarning: ptr.To("use v1")},
				{Name: "v1", Served: true, Storage: true},
			}},
		Status: apiextv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1alpha1", "v1"}},
	}
	fs, n, err := (&CRDReader{Client: apiextfake.NewClientset(crd)}).Read(context.Background())
	if err != nil || n != 1 {
		t.Fatal(err, n)
	}
	got := Classify(apilifecycle.Builtin(), Target{Release: apilifecycle.R(1, 38)}, fs)
	type row struct{ Status, API, Detail, Hint string }
	var rows []row
	for _, f := range got {
		rows = append(rows, row{string(f.Status), f.APIVersion, f.Detail, f.Hint})
	}
	want := []row{
		{"removed", "example.com/v1alpha1", "version marked deprecated", ""},
		{"removed", "example.com/v1alpha1", "status.storedVersions still lists v1alpha1, which is no longer served: objects may still be stored in it", "kubectl crd-migrate widgets.example.com"},
		{"deprecated", "example.com/v1beta1", "deprecation warning: use v1", ""},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Error(d)
	}
}

func TestHelmReader(t *testing.T) {
	manifest := "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: nightly\n"
	old := "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata:\n  name: web\n"
	sec := func(name string, rev int, status string, data []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps",
			Labels: map[string]string{"name": "rel", "owner": "helm", "status": status, "version": strings.Repeat("", 0) + string(rune('0'+rev))}},
			Type: "helm.sh/release.v1", Data: map[string][]byte{"release": data}}
	}
	cs := fake.NewClientset(
		sec("sh.helm.release.v1.rel.v4", 4, "deployed", releaseText(t, manifest, true)),
		sec("sh.helm.release.v1.rel.v3", 3, "superseded", releaseText(t, old, true)),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "apps"}, Type: "Opaque"},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rel2.v1", Namespace: "apps", Labels: map[string]string{"name": "rel2", "owner": "helm", "status": "deployed", "version": "1"}},
			Data: map[string]string{"release": "not base64 !"}},
	)
	h := &HelmReader{Kube: cs, Scanner: &ManifestScanner{}}
	res, err := h.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) != 1 || res.Findings[0].Kind != "CronJob" || res.Findings[0].Source != SourceHelm ||
		res.Findings[0].Location != "release ns/rel revision 4: CronJob nightly" || res.Releases != 2 {
		t.Errorf("findings %+v releases %d", res.Findings, res.Releases)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "corrupt") {
		t.Errorf("skipped %+v", res.Skipped)
	}
	h.History = true
	res, _ = h.Read(context.Background())
	if len(res.Findings) != 2 {
		t.Errorf("history: %+v", res.Findings)
	}
}

func TestObjectsReader(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	obj := func(name, lastApplied string, mf ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("resource.k8s.io/v1")
		u.SetKind("DeviceClass")
		u.SetName(name)
		u.SetManagedFields(mf)
		if lastApplied != "" {
			u.SetAnnotations(map[string]string{LastAppliedAnnotation: lastApplied})
		}
		return u
	}
	objs := []runtime.Object{
		obj("writer", "", metav1.ManagedFieldsEntry{Manager: "legacy", APIVersion: "resource.k8s.io/v1beta1", Operation: metav1.ManagedFieldsOperationApply, Time: &at},
			metav1.ManagedFieldsEntry{Manager: "new", APIVersion: "resource.k8s.io/v1", Operation: metav1.ManagedFieldsOperationUpdate}),
		obj("stale", `{"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceClass"}`,
			metav1.ManagedFieldsEntry{Manager: "kubectl-client-side-apply", APIVersion: "resource.k8s.io/v1", Operation: metav1.ManagedFieldsOperationUpdate}),
		obj("annotation-only", `{"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceClass"}`),
		obj("clean", ""),
	}
	gvr := schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeviceClassList"}, objs...)
	served := &Served{preferred: map[string]string{"resource.k8s.io": "v1"},
		kinds: map[string]map[string]string{"resource.k8s.io/v1": {"DeviceClass": "deviceclasses"}, "resource.k8s.io/v1beta1": {"DeviceClass": "deviceclasses"}}}
	r := &ObjectsReader{Dynamic: dyn, Table: apilifecycle.Builtin(), Served: served, PageSize: 2}
	res, err := r.Read(context.Background(), apilifecycle.R(1, 38))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range res.Findings {
		got = append(got, f.Name+" "+f.Who+" "+f.APIVersion)
	}
	want := []string{"annotation-only kubectl apply resource.k8s.io/v1beta1", "writer legacy resource.k8s.io/v1beta1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
	if res.StaleAnnotations != 1 || res.Scanned != 4 {
		t.Errorf("stale %d scanned %d", res.StaleAnnotations, res.Scanned)
	}

	// -n limits namespaced resources only: DeviceClass is cluster-scoped
	// and has no namespaced path (a real apiserver answers 404), so it is
	// listed cluster-wide, as kubectl does.
	served.clusterScoped = map[string]map[string]bool{"resource.k8s.io/v1": {"deviceclasses": true}}
	var nsList []string
	dyn.PrependReactor("list", "deviceclasses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		nsList = append(nsList, a.GetNamespace())
		return false, nil, nil
	})
	r = &ObjectsReader{Dynamic: dyn, Table: apilifecycle.Builtin(), Served: served, PageSize: 2, Namespace: "team-a"}
	res, err = r.Read(context.Background(), apilifecycle.R(1, 38))
	if err != nil {
		t.Fatal(err)
	}
	if res.Scanned != 4 || len(nsList) == 0 || slices.ContainsFunc(nsList, func(ns string) bool { return ns != "" }) {
		t.Errorf("-n with a cluster-scoped kind: scanned %d, listed in namespaces %q", res.Scanned, nsList)
	}

	// Objects the caller already read are scanned as they are, with the
	// same findings and no list; a resource it reports false for is listed.
	for _, have := range []bool{true, false} {
		nsList = nil
		r = &ObjectsReader{Dynamic: dyn, Table: apilifecycle.Builtin(), Served: served, PageSize: 2,
			Listed: func(_ context.Context, gr schema.GroupResource) ([]metav1.Object, bool) {
				var out []metav1.Object
				for _, o := range objs {
					out = append(out, o.(*unstructured.Unstructured))
				}
				return out, have && gr == gvr.GroupResource()
			}}
		res, err = r.Read(context.Background(), apilifecycle.R(1, 38))
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, f := range res.Findings {
			got = append(got, f.Name+" "+f.Who+" "+f.APIVersion)
		}
		slices.Sort(got)
		if d := cmp.Diff(want, got); d != "" || res.Scanned != 4 || (len(nsList) == 0) != have {
			t.Errorf("Listed %v: scanned %d, %d lists, findings %s", have, res.Scanned, len(nsList), d)
		}
	}
}

// With a metadata client the objects reader lists metadata only, in pages,
// and reports exactly what listing whole objects reports, namespace rule
// included; the dynamic client is not called.
func TestObjectsReaderMetadata(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	obj := func(name, lastApplied string, mf ...metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: mf}}
		if lastApplied != "" {
			m.Annotations = map[string]string{LastAppliedAnnotation: lastApplied}
		}
		return m
	}
	objs := []runtime.Object{
		obj("writer", "", metav1.ManagedFieldsEntry{Manager: "legacy", APIVersion: "resource.k8s.io/v1beta1", Operation: metav1.ManagedFieldsOperationApply, Time: &at},
			metav1.ManagedFieldsEntry{Manager: "new", APIVersion: "resource.k8s.io/v1", Operation: metav1.ManagedFieldsOperationUpdate}),
		obj("stale", `{"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceClass"}`,
			metav1.ManagedFieldsEntry{Manager: "kubectl-client-side-apply", APIVersion: "resource.k8s.io/v1", Operation: metav1.ManagedFieldsOperationUpdate}),
		obj("annotation-only", `{"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceClass"}`),
		obj("clean", ""),
	}
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	md := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	var lists []string
	md.PrependReactor("list", "deviceclasses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lists = append(lists, a.GetNamespace())
		return false, nil, nil
	})
	dyn := dynfake.NewSimpleDynamicClient(runtime.NewScheme())
	dyn.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		t.Errorf("dynamic client called: %s %s", a.GetVerb(), a.GetResource())
		return true, nil, nil
	})
	served := &Served{preferred: map[string]string{"resource.k8s.io": "v1"},
		kinds:         map[string]map[string]string{"resource.k8s.io/v1": {"DeviceClass": "deviceclasses"}, "resource.k8s.io/v1beta1": {"DeviceClass": "deviceclasses"}},
		clusterScoped: map[string]map[string]bool{"resource.k8s.io/v1": {"deviceclasses": true}}}
	for _, ns := range []string{"", "team-a"} {
		lists = nil
		r := &ObjectsReader{Metadata: md, Dynamic: dyn, Table: apilifecycle.Builtin(), Served: served, PageSize: 2, Namespace: ns}
		res, err := r.Read(context.Background(), apilifecycle.R(1, 38))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range res.Findings {
			got = append(got, f.Name+" "+f.Who+" "+f.APIVersion+" "+f.LastSeen.Format(time.RFC3339))
		}
		want := []string{"annotation-only kubectl apply resource.k8s.io/v1beta1 0001-01-01T00:00:00Z", "writer legacy resource.k8s.io/v1beta1 2026-01-01T00:00:00Z"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("-n %q: %s", ns, d)
		}
		if res.StaleAnnotations != 1 || res.Scanned != 4 || len(lists) == 0 || slices.ContainsFunc(lists, func(l string) bool { return l != "" }) {
			t.Errorf("-n %q: stale %d scanned %d, listed in namespaces %q", ns, res.StaleAnnotations, res.Scanned, lists)
		}
	}
}

// With a metadata client, the first pass (which revision to decode) reads
// labels only and the typed client lists the records once: the findings
// are the same, and no record's data is fetched twice.
func TestHelmReaderMetadataFirstPass(t *testing.T) {
	manifest := "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: nightly\n"
	old := "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata:\n  name: web\n"
	meta := func(name string, rev int, status string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"name": "rel", "owner": "helm", "status": status, "version": strconv.Itoa(rev)}}
	}
	v4, v3 := meta("sh.helm.release.v1.rel.v4", 4, "deployed"), meta("sh.helm.release.v1.rel.v3", 3, "superseded")
	cs := fake.NewClientset(
		&corev1.Secret{ObjectMeta: v4, Type: "helm.sh/release.v1", Data: map[string][]byte{"release": releaseText(t, manifest, true)}},
		&corev1.Secret{ObjectMeta: v3, Type: "helm.sh/release.v1", Data: map[string][]byte{"release": releaseText(t, old, true)}},
	)
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	pom := func(m metav1.ObjectMeta) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: m}
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, pom(v4), pom(v3))
	h := &HelmReader{Kube: cs, Metadata: md, Scanner: &ManifestScanner{}}
	res, err := h.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) != 1 || res.Findings[0].Kind != "CronJob" || res.Records != 2 || res.Releases != 1 {
		t.Errorf("findings %+v records %d releases %d", res.Findings, res.Records, res.Releases)
	}
	secretLists := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "secrets" {
			secretLists++
		}
	}
	if secretLists != 1 {
		t.Errorf("the typed client listed secrets %d times, want once", secretLists)
	}
	// Every kept revision: one pass, no metadata pass needed.
	cs.ClearActions()
	h.History = true
	res, err = h.Read(context.Background())
	if err != nil || len(res.Findings) != 2 || res.Records != 2 || res.Releases != 1 {
		t.Errorf("history: %v %+v records %d releases %d", err, res.Findings, res.Records, res.Releases)
	}
}

func TestMetricsPath(t *testing.T) {
	for _, c := range []struct {
		families []string
		want     string
	}{
		{nil, "/metrics"},
		{[]string{DeprecatedAPIsMetric}, "/metrics?name%5B%5D=apiserver_requested_deprecated_apis"},
		{[]string{"a", "b_total"}, "/metrics?name%5B%5D=a&name%5B%5D=b_total"},
	} {
		if got := MetricsPath(c.families...); got != c.want {
			t.Errorf("MetricsPath(%q) = %q, want %q", c.families, got, c.want)
		}
	}
}
