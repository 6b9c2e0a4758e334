package deprecations

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yaml3 "sigs.k8s.io/yaml/goyaml.v3"
)

// splitDocs splits YAML into documents the way scanYAML does.
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	start, off := 0, 0
	for off < len(data) {
		nl := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		line := data[off:]
		if nl >= 0 {
			line, next = data[off:off+nl], off+nl+1
		}
		if isDocSeparator(bytes.TrimRight(line, "\r")) {
			docs = append(docs, data[start:off])
			start = next
		}
		off = next
	}
	return append(docs, data[start:])
}

// checkPlainYAML fails when plainYAML calls a document valid that the
// parser rejects.
func checkPlainYAML(t *testing.T, doc []byte) bool {
	t.Helper()
	if !plainYAML(doc) {
		return false
	}
	var n yaml3.Node
	if err := yaml3.Unmarshal(doc, &n); err != nil {
		t.Errorf("plainYAML passes a document the parser rejects (%v):\n%s", err, doc)
	}
	return true
}

// TestPlainYAMLAgreesWithParser holds the shortcut of the validity check
// to the parser's verdict on every document of the shared corpus: it may
// leave a document to the parser, never pass one the parser rejects.
func TestPlainYAMLAgreesWithParser(t *testing.T) {
	dir := corpus(t)
	var docs, plain int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, doc := range splitDocs(b) {
			docs++
			if checkPlainYAML(t, doc) {
				plain++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d documents in the corpus pass the shortcut", plain, docs)
	if plain < docs/3 {
		t.Errorf("only %d of %d documents pass the shortcut", plain, docs)
	}
}

func TestPlainYAMLCases(t *testing.T) {
	for _, tc := range []struct {
		doc   string
		plain bool
	}{
		{"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {}\nspec:\n  containers:\n  - name: c\n    args: [\"a\"]\n", true},
		{"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {}\nspec:\n  containers:\n  - name: c\n    image: \"x:1\"\n    args:\n      - run\n", true},
		{"a: |\n  line one\n  line: two\nb: c\n", true},
		{"a: b\n  c: d\n", false},         // invalid: mapping in a scalar
		{"a: b\na: c\n", true},            // duplicate key: the parser takes it too
		{"a:\n    b: 1\n  c: 2\n", false}, // dedent to no level
		{"a: b: c\n", false},              // invalid
		{"a:\n- x\n- y\nb: z\n", true},    // indentless sequence
		{"a: 'it''s'\n", false},           // escaped quote: the parser decides
		{"a: \"x\"y\n", false},            // junk after a quote
		{"a:\tb\n", false},                // a tab
		{"- a\n", false},                  // a top-level sequence
		{"a: &x b\n", false},              // an anchor
		{"a: |\n  x\n y\n", false},        // a block scalar dedented into nothing
		{"a:\r\n  b: c\r\n", true},        // CRLF
		{"a: b # comment\n", true},        // a comment after a value
		{"kind: X\nspec:\n  - a: 1\n    b: 2\n  - a: 3\n", true},
		// Block scalars as sequence items (command: ["/bin/sh", "-c", |...]).
		{"a:\n- /bin/bash\n- |\n  set -e\n  b: c\n- d\ne: f\n", true},
		{"a:\n  - >-\n    x\n    y\n  - z\n", true},
		{"a:\n- |\n- b\n", true},        // an empty block scalar
		{"a:\n- |\nb\n", false},         // content not past the dash
		{"a:\n  - |\n  x\n", false},     // content at the dash's column
		{"a:\n- |2\n   x\n", false},     // an indentation indicator: the parser decides
		{"a:\n- | # c\n  x\n", false},   // a comment after the indicator
		{"a:\n- |\n   x\n  y\n", false}, // dedented below its first line
		// Multi-line scalars, as writers wrap long descriptions.
		{"a:\n  description: 'APIVersion defines\n    of an object: https://x#y'\n  type: string\n", true},
		{"a:\n  description: ServiceMonitorSpec contains\n    ServiceMonitor.\n\n    More.\n  b: c\n", true},
		{"a: b\n c\nd: e\n", true},
		{"a: 'b\n\n  c' # d\ne: f\n", true},
		{"a: 'b\nc'\n", false},            // not indented past the mapping
		{"a:\n  b: 'c\n  d: e'\n", false}, // a key-like line inside the quotes at the mapping's column
		{"a: 'b\n  it''s'\n", false},      // an escaped quote
		{"a: 'b\n  c' d\n", false},        // junk after the closing quote
		{"a: 'b\n  c\n", false},           // never closed
		{"a: b\n  c: d\n", false},         // a mapping in a scalar
		{"a: b\n  c:\n", false},
		{"a: b\n  - c\n", false},      // a dash: the parser decides
		{"a: b\n  # c\n  d\n", false}, // a comment ends the scalar
		{"a: b # c\n  d\n", false},
		{"a: b\n  c #d\n", false},
		{"a: [b]\n  c\n", false},
		{"a: \"b\"\n  c\n", false},
		{"- a: b\n    c\n", false}, // a top-level sequence
		{"x:\n- a: b\n   c\n- d\n", true},
		{"x:\n- a: b\n  c\n", false}, // at the item mapping's column
		{"x:\n- b\n  c\n", false},    // a sequence item's scalar continued: the parser decides
	} {
		if got := checkPlainYAML(t, []byte(tc.doc)); got != tc.plain {
			t.Errorf("plainYAML(%q) = %v, want %v", tc.doc, got, tc.plain)
		}
	}
}

// TestPlainYAMLFlowSequencesAndComments covers one-line flow sequences
// and comments after values, and what stays with the parser.
func TestPlainYAMLFlowSequencesAndComments(t *testing.T) {
	for _, tc := range []struct {
		doc   string
		plain bool
	}{
		{"command: [ \"/bin/sh\", \"-c\", \"a && b; c # d, [e]\" ]\n", true},
		{"a: ['x, y', \"z]\", v1, k8s.io/x-y_z] # c\n", true},
		{"a:\n- [a, b] # c\n- \"x\" # c\n- y # c\n", true},
		{"a: [ ]\nb: '' # c\nc: {} # c\n", true},
		{"image: k8s.gcr.io/redis:e2e  # or just image: redis\n", true},
		{"a: [\"x\",]\n", false},      // a trailing comma
		{"a: [\"x\"]#c\n", false},     // no space before the comment
		{"a: \"x\"#c\n", false},       // no space before the comment
		{"a: [x] y\n", false},         // junk after the sequence
		{"a: ['it''s']\n", false},     // an escaped quote
		{"a: [\"a\\\"\"]\n", false},   // an escape
		{"a: [a, [b]]\n", false},      // a nested sequence
		{"a: [a: b]\n", false},        // a mapping in the sequence
		{"a: [a,\n  b]\n", false},     // over two lines
		{"a: [-a]\n", false},          // a plain item with an indicator first
		{"a: [a b]\n", false},         // a space in a plain item
		{"a: # c\n  b: d\n", false},   // a comment where the value goes
		{"a: | # c\n  x\n", false},    // a comment after a block scalar header
		{"a: b\n  # c\n  d\n", false}, // a continued scalar
	} {
		if got := checkPlainYAML(t, []byte(tc.doc)); got != tc.plain {
			t.Errorf("plainYAML(%q) = %v, want %v", tc.doc, got, tc.plain)
		}
	}
}

// FuzzPlainYAML: plainYAML never passes a document the parser rejects.
func FuzzPlainYAML(f *testing.F) {
	for _, s := range []string{"a: b\n", "a:\n- x\n", "a: |\n  x\nb: c\n", "a:\n  b: c\n  d:\n  - e: f\n", "a: b\n  c: d\n", "a: [\"b\", 'c', d] # e\n", "a: \"b\" # c\n",
		"a:\n  d: 'x y\n    z: w#'\n  e: f g\n    h\n\n    i\nj:\n- |\n  k\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkPlainYAML(t, doc)
	})
}

// eachCorpusYAMLDoc calls fn with each document of the shared corpus's
// .yaml and .yml files that has no unrendered template syntax (which
// does not decode).
func eachCorpusYAMLDoc(t *testing.T, fn func(path string, doc []byte)) {
	t.Helper()
	err := filepath.WalkDir(corpus(t), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, doc := range splitDocs(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))) {
			if !bytes.Contains(doc, []byte("{{")) {
				fn(p, doc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLineScanAgreesWithFullDecode holds the line scanner (the fast path
// that reads apiVersion, kind and metadata without decoding) to a full
// YAML decode of each document of the shared corpus: the same objects,
// names and lines. Documents with unrendered templates (which do not
// decode) and documents that do not parse are left out.
func TestLineScanAgreesWithFullDecode(t *testing.T) {
	s := &ManifestScanner{}
	s.init()
	type key struct {
		apiVersion, kind, ns, name string
		line                       int
	}
	keysOf := func(r ManifestResult) []key {
		var out []key
		for _, f := range r.Findings {
			out = append(out, key{f.APIVersion, f.Kind, f.Namespace, f.Name, f.Line})
		}
		return out
	}
	compared := 0
	eachCorpusYAMLDoc(t, func(p string, doc []byte) {
		var fast, full ManifestResult
		s.scanYAML(p, doc, 0, &fast)
		s.parseYAMLDoc(p, doc, 0, &full)
		if len(full.Skipped) > 0 {
			return
		}
		compared++
		if a, b := keysOf(fast), keysOf(full); !slices.Equal(a, b) {
			t.Errorf("%s: the line scanner read %v, the full decode %v", p, a, b)
		}
		if fast.Objects != full.Objects {
			t.Errorf("%s: the line scanner counted %d objects, the full decode %d", p, fast.Objects, full.Objects)
		}
	})
	t.Logf("%d documents compared", compared)
	if compared < 500 {
		t.Errorf("only %d documents compared", compared)
	}
}

// TestPlainYAMLQuotedKeysAndFlags covers what the shortcut reads beyond
// plain keys and letter-led scalars: quoted keys, command-line flags in
// sequences and values, and punctuation inside plain scalars; and what it
// must still leave to the parser, such as a key longer than the parser
// takes.
func TestPlainYAMLQuotedKeysAndFlags(t *testing.T) {
	long := strings.Repeat("k", 1025)
	for _, tc := range []struct {
		doc   string
		plain bool
	}{
		{"metadata:\n  annotations:\n    \"helm.sh/hook\": crd-install\n    'a b': c\n", true},
		{"args:\n- -f\n- --v=2\n- --config=/etc/x.yaml\nreplicas: -1\n", true},
		{"minAvailable: 67%\nimage: k8s.gcr.io/x:v1@sha256\nq: a\"b'c,d[e]{f}\n", true},
		{"a: b#c\nd: e :f\n", true},
		{"\"a\": b\na: c\n", true}, // the same key twice: the parser takes it too
		{"\"a\\\"\": b\n", false},  // an escape: the parser decides
		{"'it''s': b\n", false},    // an escaped quote in a key
		{"\"\": b\n", false},       // an empty key
		{"\"a\"b: c\n", false},     // junk after a quoted key
		{"a:\n- - b\n", false},     // a nested sequence
		{"a:\n- -\n", false},       // an empty nested sequence
		{"a: -\n", false},          // a sequence where a value goes
		{"a: --\n", false},         // two dashes alone
		{"a: -.5\n", false},        // only flags that start with a letter or digit
		{"a: b: c\n", false},       // still invalid
		{"a: %b\n", false},         // a directive indicator first
		{"a: x #c\n", true},        // a comment
		{"a: x:\n", false},         // a colon at the end
		{"a: b\n" + long + ": v\n", false},
		{"a: b\n\"" + long + "\": v\n", false},
		{"a:\n- " + long + ": v\n", false},
	} {
		if got := checkPlainYAML(t, []byte(tc.doc)); got != tc.plain {
			t.Errorf("plainYAML(%.80q) = %v, want %v", tc.doc, got, tc.plain)
		}
	}
}
