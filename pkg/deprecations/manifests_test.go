package deprecations

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

type hit struct {
	Line       int
	APIVersion string
	Kind       string
	Name       string
	Unknown    bool
}

func hits(res ManifestResult) []hit {
	var out []hit
	for _, f := range res.Findings {
		out = append(out, hit{f.Line, f.APIVersion, f.Kind, f.Name, f.Undeterminable})
	}
	return out
}

func scan(t *testing.T, in string) ManifestResult {
	t.Helper()
	s := &ManifestScanner{}
	return s.Scan("in.yaml", []byte(in))
}

func TestScanManifests(t *testing.T) {
	cronjob := hit{1, "batch/v1beta1", "CronJob", "a", false}
	for _, tc := range []struct {
		name      string
		in        string
		want      []hit
		objects   int
		skipped   int
		partial   bool
		skipMatch string
	}{
		{name: "single", in: "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: a\n", want: []hit{cronjob}, objects: 1},
		{name: "current API", in: "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: a\n", objects: 1},
		{name: "kind before apiVersion", in: "kind: CronJob\napiVersion: batch/v1beta1\nmetadata:\n  name: a\n", want: []hit{cronjob}, objects: 1},
		{name: "quoted and commented", in: "apiVersion: \"batch/v1beta1\" # old\nkind: 'CronJob'\nmetadata:\n  labels: {x: y}\n  name: a # the name\n",
			want: []hit{{1, "batch/v1beta1", "CronJob", "a", false}}, objects: 1},
		{name: "CRLF", in: "apiVersion: batch/v1beta1\r\nkind: CronJob\r\nmetadata:\r\n  name: a\r\n", want: []hit{cronjob}, objects: 1},
		{name: "BOM", in: "\xef\xbb\xbfapiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: a\n", want: []hit{cronjob}, objects: 1},
		{name: "multi-document with comments, empty docs and end marker",
			in:   "# header\n---\n--- # nothing\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\napiVersion: extensions/v1beta1\nkind: Ingress\nmetadata:\n  name: web\n  namespace: ns\n...\n",
			want: []hit{{11, "extensions/v1beta1", "Ingress", "web", false}}, objects: 2},
		{name: "nested kind is not top level",
			in:      "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: h\nspec:\n  scaleTargetRef:\n    apiVersion: extensions/v1beta1\n    kind: Deployment\n",
			objects: 1},
		{name: "block scalar holding a manifest",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  x.yaml: |\n    apiVersion: batch/v1beta1\n    kind: CronJob\n",
			objects: 1},
		{name: "YAML List",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1beta1\n  kind: CronJob\n  metadata:\n    name: a\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: d\n",
			want: []hit{{4, "batch/v1beta1", "CronJob", "a", false}}, objects: 2},
		{name: "List with items before kind",
			in:   "items:\n- kind: CronJob\n  apiVersion: batch/v1beta1\n  metadata: {name: a}\nkind: List\napiVersion: v1\n",
			want: []hit{{2, "batch/v1beta1", "CronJob", "a", false}}, objects: 1},
		{name: "flow style", in: "{apiVersion: batch/v1beta1, kind: CronJob, metadata: {name: a}}\n", want: []hit{cronjob}, objects: 1},
		{name: "JSON", in: "{\n  \"kind\": \"CronJob\",\n  \"apiVersion\": \"batch/v1beta1\",\n  \"metadata\": {\"name\": \"a\"}\n}\n",
			want: []hit{{3, "batch/v1beta1", "CronJob", "a", false}}, objects: 1},
		{name: "JSON stream",
			in:   "{\"apiVersion\":\"batch/v1beta1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"a\"}}\n{\"apiVersion\":\"policy/v1beta1\",\n\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"p\"}}",
			want: []hit{cronjob, {2, "policy/v1beta1", "PodDisruptionBudget", "p", false}}, objects: 2},
		{name: "JSON List",
			in:   "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"s\"}},\n {\"apiVersion\":\"batch/v1beta1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"a\"}}]}",
			want: []hit{{3, "batch/v1beta1", "CronJob", "a", false}}, objects: 2},
		{name: "JSON array", in: "[{\"apiVersion\":\"batch/v1beta1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"a\"}}]", want: []hit{cronjob}, objects: 1},
		{name: "broken JSON after a good object",
			in:   "{\"apiVersion\":\"batch/v1beta1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"a\"}}\n{\"apiVersion\": \"v1\",\n\"kind\": }",
			want: []hit{cronjob}, objects: 1, skipped: 1, skipMatch: "does not parse as JSON"},
		{name: "helm template with literal apiVersion",
			in:   "{{- if .Values.enabled }}\napiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: {{ template \"x.fullname\" . }}\n{{- end }}\n",
			want: []hit{{2, "policy/v1beta1", "PodSecurityPolicy", `{{ template "x.fullname" . }}`, false}}, objects: 1, skipped: 1, partial: true},
		{name: "helm template with templated apiVersion",
			in:   "apiVersion: {{ template \"cronjob.apiVersion\" . }}\nkind: CronJob\nmetadata:\n  name: x\n",
			want: []hit{{1, `{{ template "cronjob.apiVersion" . }}`, "CronJob", "x", true}}, objects: 1, skipped: 1, partial: true},
		{name: "helm template with a partly templated apiVersion",
			in:   "apiVersion: scheduling.k8s.io/{{ .Values.v }}\nkind: PriorityClass\nmetadata:\n  name: x\n",
			want: []hit{{1, "scheduling.k8s.io/{{ .Values.v }}", "PriorityClass", "x", true}}, objects: 1, skipped: 1, partial: true},
		{name: "capabilities conditional",
			in:   "{{- if .Capabilities.APIVersions.Has \"batch/v1\" }}\napiVersion: batch/v1\n{{- else }}\napiVersion: batch/v1beta1\n{{- end }}\nkind: CronJob\nmetadata:\n  name: a\n",
			want: []hit{{4, "batch/v1beta1", "CronJob", "a", false}}, objects: 1, skipped: 1, partial: true},
		{name: "malformed YAML with a deprecated object",
			in:   "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: a\n   bad: [indent\n",
			want: []hit{cronjob}, objects: 1, skipped: 1, skipMatch: "does not parse"},
		{name: "malformed document without keys", in: "{a: [b\n", skipped: 1, skipMatch: "does not parse"},
		{name: "malformed document with a top key", in: "foo: [\n", skipped: 1, skipMatch: "does not parse: line 1: did not find expected node content"},
		{name: "malformed document beside an object", in: "foo: [\n---\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: a\n",
			want: []hit{{3, "batch/v1beta1", "CronJob", "a", false}}, objects: 1, skipped: 1, skipMatch: "does not parse"},
		{name: "binary", in: "\x00\x01\x02apiVersion: batch/v1beta1\n", skipped: 1, skipMatch: "binary"},
		{name: "not kubernetes", in: "replicaCount: 1\nimage:\n  tag: x\n"},
		{name: "empty", in: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := scan(t, tc.in)
			if d := cmp.Diff(tc.want, hits(res)); d != "" {
				t.Errorf("findings (-want +got):\n%s", d)
			}
			if res.Objects != tc.objects {
				t.Errorf("objects = %d, want %d", res.Objects, tc.objects)
			}
			if len(res.Skipped) != tc.skipped {
				t.Fatalf("skipped = %+v, want %d", res.Skipped, tc.skipped)
			}
			if tc.skipped > 0 {
				s := res.Skipped[0]
				if s.Partial != tc.partial || !strings.Contains(s.Reason, tc.skipMatch) || (tc.partial && s.Hint != TemplateHint) {
					t.Errorf("skipped = %+v", s)
				}
			}
		})
	}
}

func releaseText(t testing.TB, manifest string, gz bool) []byte {
	t.Helper()
	js, _ := json.Marshal(map[string]any{"name": "rel", "namespace": "ns", "version": 4, "info": map[string]any{"status": "deployed"},
		"chart": map[string]any{"metadata": map[string]any{"name": "c", "version": "1.0.0"}}, "manifest": manifest,
		"config": map[string]any{"password": "s3cret"}})
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(js)
		_ = zw.Close()
		js = b.Bytes()
	}
	return []byte(base64.StdEncoding.EncodeToString(js))
}

func TestScanHelmSecretInFile(t *testing.T) {
	rel := releaseText(t, "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata:\n  name: d\n", true)
	sec, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
		"metadata": map[string]any{"name": "sh.helm.release.v1.rel.v4"}, "data": map[string]any{"release": base64.StdEncoding.EncodeToString(rel)}})
	res := (&ManifestScanner{}).Scan("secret.json", sec)
	if len(res.Findings) != 1 || res.Findings[0].Kind != "Deployment" || !strings.Contains(res.Findings[0].Who, "ns/rel") {
		t.Fatalf("findings %+v skipped %+v", res.Findings, res.Skipped)
	}
	if strings.Contains(res.Findings[0].Detail, "s3cret") {
		t.Error("values leaked")
	}
	// The same Secret as YAML.
	y := "apiVersion: v1\nkind: Secret\ntype: helm.sh/release.v1\nmetadata:\n  name: x\ndata:\n  release: " + base64.StdEncoding.EncodeToString(rel) + "\n"
	res = (&ManifestScanner{}).Scan("secret.yaml", []byte(y))
	if len(res.Findings) != 1 {
		t.Fatalf("yaml: findings %+v skipped %+v", res.Findings, res.Skipped)
	}
	// A corrupt record is reported with its file and line.
	res = (&ManifestScanner{}).Scan("bad.yaml", []byte("apiVersion: v1\nkind: Secret\ntype: helm.sh/release.v1\nmetadata:\n  name: x\ndata:\n  release: Zm9v\n"))
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "Helm release record") || res.Skipped[0].Line != 1 {
		t.Fatalf("corrupt: %+v", res.Skipped)
	}
}

func TestDecodeRelease(t *testing.T) {
	for _, gz := range []bool{true, false} {
		rel, err := DecodeRelease(releaseText(t, "a: b", gz), 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(HelmRelease{Name: "rel", Namespace: "ns", Revision: 4, Status: "deployed", Chart: "c", ChartVersion: "1.0.0", Manifests: []string{"a: b"}}, rel); d != "" {
			t.Error(d)
		}
	}
	big := releaseText(t, strings.Repeat("x", 1<<20), true)
	if _, err := DecodeRelease(big, 1<<16); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("bound not enforced: %v", err)
	}
	for _, bad := range []string{"", "!!!", base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 1, 2}), base64.StdEncoding.EncodeToString([]byte("{"))} {
		if _, err := DecodeRelease([]byte(bad), 0); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
}

func TestScanPaths(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "sub", ".git"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "a.yml"), []byte("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: a\n"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "sub", ".git", "b.yaml"), []byte("apiVersion: batch/v1beta1\nkind: CronJob\n"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("apiVersion: batch/v1beta1\nkind: CronJob\n"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "big.json"), bytes.Repeat([]byte(" "), 2048), 0o600))
	s := &ManifestScanner{MaxFileSize: 1024}
	res, err := s.ScanPaths(context.Background(), []string{dir, "-"}, strings.NewReader("kind: Ingress\napiVersion: extensions/v1beta1\n"))
	must(err)
	if res.Files != 3 || len(res.Findings) != 2 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "larger than") {
		t.Errorf("files %d findings %+v skipped %+v", res.Files, res.Findings, res.Skipped)
	}
	if _, err := s.ScanPaths(context.Background(), []string{filepath.Join(dir, "missing")}, nil); err == nil {
		t.Error("missing path: want error")
	}
}

func TestClassify(t *testing.T) {
	tab := apilifecycle.Builtin()
	in := []Finding{
		{Source: SourceManifests, APIVersion: "resource.k8s.io/v1beta1", Kind: "ResourceClaim"},
		{Source: SourceManifests, APIVersion: "batch/v1beta1", Kind: "CronJob"},
		{Source: SourceManifests, APIVersion: "batch/v1", Kind: "CronJob"},
		{Source: SourceMetrics, APIVersion: "resource.k8s.io/v1beta1", Resource: "resourceslices"},
		{Source: SourceManifests, APIVersion: "{{ x }}", Kind: "CronJob", Undeterminable: true, Candidates: []string{"batch/v1beta1", "batch/v2alpha1"}},
		{Source: SourceAudit, APIVersion: "example.com/v1beta1", Resource: "widgets", server: &serverLifecycle{removed: "1.40"}},
	}
	served := func(gv, kind string) bool { return gv == "batch/v1" }
	got := Classify(tab, Target{Release: apilifecycle.R(1, 36), Served: served}, in)
	type row struct{ Status, API, Kind, Resource, Replacement string }
	var rows []row
	for _, f := range got {
		rows = append(rows, row{string(f.Status), f.APIVersion, f.Kind, f.Resource, f.Replacement})
	}
	want := []row{
		{"removed", "batch/v1beta1", "CronJob", "cronjobs", "batch/v1 CronJob"},
		{"unknown", "{{ x }}", "CronJob", "", ""},
		{"deprecated", "resource.k8s.io/v1beta1", "ResourceSlice", "resourceslices", "resource.k8s.io/v1 ResourceSlice"},
		{"deprecated", "example.com/v1beta1", "", "widgets", ""},
		{"deprecated", "resource.k8s.io/v1beta1", "ResourceClaim", "resourceclaims", "resource.k8s.io/v1 ResourceClaim"},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Error(d)
	}
	if got[0].ReplacementServed == nil || !*got[0].ReplacementServed {
		t.Errorf("replacement served: %v", got[0].ReplacementServed)
	}
	if !cmp.Equal(got[1].Candidates, []string{"batch/v1beta1"}) {
		t.Errorf("candidates %v", got[1].Candidates)
	}
}

// A count takes its noun's number in the source's status line.
func TestManifestScannedCountsTakeTheirNumber(t *testing.T) {
	for _, tc := range []struct {
		files, objects int
		want           string
	}{{1, 1, "1 file, 1 object"}, {2, 0, "2 files, 0 objects"}} {
		if got := (ManifestSourceResult{Files: tc.files, Objects: tc.objects}).Scanned(); got != tc.want {
			t.Errorf("Scanned() = %q, want %q", got, tc.want)
		}
	}
}
