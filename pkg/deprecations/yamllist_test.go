package deprecations

import (
	"slices"
	"strings"
	"testing"
)

// checkListItems holds listItems to the full decode on one document: when
// it reads the document at all, it must see the same objects (apiVersion,
// kind, name, namespace and line, in order) and count as many. It reports
// whether listItems read the document.
func checkListItems(t *testing.T, doc []byte) bool {
	t.Helper()
	if !plainYAML(doc) {
		return false
	}
	var fastObjs, fullObjs []object
	fast := &ManifestScanner{observe: func(o object) { fastObjs = append(fastObjs, o) }}
	full := &ManifestScanner{observe: func(o object) { fullObjs = append(fullObjs, o) }}
	fast.init()
	full.init()
	var fr, dr ManifestResult
	if !fast.listItems("doc", doc, 0, &fr) {
		if fr.Objects != 0 || len(fr.Findings) != 0 || len(fastObjs) != 0 {
			t.Errorf("listItems declined but reported %d objects:\n%s", fr.Objects, doc)
		}
		return false
	}
	full.parseYAMLDoc("doc", doc, 0, &dr)
	if len(dr.Skipped) > 0 {
		t.Errorf("listItems read a document the decode rejects (%s):\n%s", dr.Skipped[0].Reason, doc)
		return true
	}
	if !slices.Equal(fastObjs, fullObjs) || fr.Objects != dr.Objects {
		t.Errorf("listItems read %+v (%d objects), the decode %+v (%d objects):\n%s", fastObjs, fr.Objects, fullObjs, dr.Objects, doc)
	}
	return true
}

// TestListItemsAgreesWithFullDecode: every List document of the shared
// corpus, and the shapes the reader must decline, read alike.
func TestListItemsAgreesWithFullDecode(t *testing.T) {
	read := 0
	eachCorpusYAMLDoc(t, func(_ string, doc []byte) {
		if checkListItems(t, doc) {
			read++
		}
	})
	t.Logf("%d List documents read without the decode", read)
	if read < 5 {
		t.Errorf("only %d List documents of the corpus read without the decode", read)
	}

	item := "- apiVersion: extensions/v1beta1\n  kind: Ingress\n  metadata:\n    name: a\n    namespace: n\n"
	for _, tc := range []struct {
		doc  string
		read bool
	}{
		{"apiVersion: v1\nkind: List\nitems:\n" + item, true},
		{"kind: List\nitems:\n  " + strings.ReplaceAll(item, "\n  ", "\n    "), true},                        // an indented sequence
		{"items:\n" + item + "- kind: Ingress\n  apiVersion: extensions/v1beta1\nkind: IngressList\n", true}, // kind last, keys reversed
		{"kind: List\nitems:\n-\n  apiVersion: extensions/v1beta1\n  kind: Ingress\n", false},                // keys under a bare dash: plainYAML leaves it to the parser
		{"kind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n" + item + "  spec:\n    rules:\n    - host: x\n      name: y\n", true},
		{"kind: List\nitems:\n- apiVersion: extensions/v1beta1 # c\n  kind: 'Ingress'\n  metadata:\n    labels:\n      name: no\n    name: \"a\"\n", true},
		{"kind: List\nitems:\n- metadata:\n    name: a\n  spec: {}\n", true}, // neither apiVersion nor kind: nothing
		{"kind: List\nitems:\n" + item + "  kind: Ingress\n", false},         // kind twice
		{"kind: List\nitems:\n" + item + "  metadata: {}\n", false},          // metadata twice
		{"kind: List\nitems:\n- apiVersion: []\n  kind: Ingress\n", false},   // a flow value
		{"kind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - kind: Ingress\n", false},
		{"kind: List\nitems:\n- x\n", false},
		{"kind: List\nitems:\n- - a: b\n", false},
		{"kind: List\nitems:\n-\n- kind: Ingress\n", false}, // a null item
		{"kind: List\nitems: []\n", false},
		{"kind: List\nitems:\n", false},
		{"kind: List\nitems:\n  a: b\n", false},
		{"kind: Deployment\nitems:\n" + item, false},
		{"kind: List\nkind: List\nitems:\n" + item, false},
		{"kind: List\nitems:\n" + item + "  data:\n    release: x\n", false},
		// Values continued on the next line (multi-line scalars).
		{"kind: List\nitems:\n- apiVersion: extensions/v1beta1\n  kind: Ingress\n  metadata:\n    name: a\n      b\n", false},
		{"kind: List\nitems:\n- apiVersion: extensions/v1beta1\n  kind: Ingress\n    x\n", false},
		{"kind: List\nitems:\n- apiVersion: extensions/v1beta1\n  kind: 'Ingress\n    x'\n", false},
		{"kind: List\nitems:\n- apiVersion: extensions/v1beta1\n  kind: Ingress\n  metadata:\n    name: a\n    description: a long\n      text\n", true},
		{"kind: List\n  x\nitems:\n" + item, false},
	} {
		if got := checkListItems(t, []byte(tc.doc)); got != tc.read {
			t.Errorf("listItems read=%v, want %v:\n%s", got, tc.read, tc.doc)
		}
	}
}
