package deprecations

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
)

// The fuzz targets check that no input makes a reader panic or hang. Seed
// corpora live in testdata/fuzz/<target>/; run one with, for example,
// go test -run '^$' -fuzz FuzzManifestScan ./pkg/deprecations

func FuzzManifestScan(f *testing.F) {
	for _, s := range []string{
		"apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: a\n",
		"kind: List\napiVersion: v1\nitems:\n- {apiVersion: extensions/v1beta1, kind: Ingress}\n",
		"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"apiVersion\":\"batch/v1beta1\",\"kind\":\"CronJob\"}]}{\"kind\":\"x\"}",
		"apiVersion: {{ .Values.v }}\nkind: CronJob\n---\n{{- if x }}\napiVersion: policy/v1beta1\n{{ end }}\n",
		"\xef\xbb\xbfapiVersion: v1\r\nkind: Secret\r\ntype: helm.sh/release.v1\r\ndata:\r\n  release: SDRzSQ==\r\n",
		"[[[[{\"items\":[[]]}]]]]",
		"--- |\n  x\n...\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: extensions/v1beta1\n  kind: Ingress\n  metadata:\n    name: a\n    namespace: n\n- kind: CronJob\n  apiVersion: batch/v1beta1\n  spec:\n    x:\n    - name: b\nmetadata:\n  resourceVersion: \"\"\n",
		"kind: List\nitems:\n- apiVersion: extensions/v1beta1\n  kind: Ingress\n  metadata:\n    name: 'a\n      b'\n    annotations:\n      d: e\n        f\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &ManifestScanner{MaxRelease: 1 << 20}
		res := s.Scan("fuzz", data)
		checkJSONWalkers(t, data)
		checkJSONOneValue(t, s, bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
		for _, doc := range splitDocs(data) {
			checkListItems(t, doc)
		}
		for _, fd := range res.Findings {
			if fd.File != "fuzz" {
				t.Fatalf("finding without its file: %+v", fd)
			}
		}
	})
}

func FuzzDecodeRelease(f *testing.F) {
	f.Add(releaseText(f, "apiVersion: batch/v1beta1\nkind: CronJob\n", true))
	f.Add(releaseText(f, "a: b", false))
	f.Add([]byte(base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})))
	f.Add([]byte("not base64"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rel, err := DecodeRelease(data, 1<<20)
		if err == nil {
			s := &ManifestScanner{}
			var res HelmResult
			(&HelmReader{Scanner: s}).decode(helmRef{kind: "Secret", ns: "n", name: "x"}, data, &res)
			_ = rel
		}
	})
}

func FuzzAuditReader(f *testing.F) {
	f.Add([]byte(auditEventLine("1", "ResponseComplete", "list", "alice", "ua", "2026-01-01T10:00:00Z") + "\n"))
	f.Add([]byte("not json k8s.io/deprecated\n{\"annotations\":{\"k8s.io/deprecated\":\"true\"},\"objectRef\":{}}\n"))
	f.Add([]byte{0x1f, 0x8b, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &AuditReader{MaxLine: 4096}
		res, err := r.ReadStream(context.Background(), "fuzz", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range res.Findings {
			if fd.Count < 1 {
				t.Fatalf("finding without a count: %+v", fd)
			}
		}
	})
}

func FuzzReadMetrics(f *testing.F) {
	f.Add(metricsText)
	f.Add("apiserver_requested_deprecated_apis 1\n")
	f.Add("apiserver_requested_deprecated_apis{group=\"\\\"\"} NaN\n# TYPE apiserver_requested_deprecated_apis histogram\n")
	f.Fuzz(func(t *testing.T, data string) {
		fs, err := ReadMetrics(strings.NewReader(data), "fuzz")
		if err == nil {
			for _, fd := range fs {
				if fd.Source != SourceMetrics {
					t.Fatalf("bad source %+v", fd)
				}
			}
		}
	})
}
