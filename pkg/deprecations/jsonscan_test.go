package deprecations

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// decoderField is jsonField as a json.Decoder reads it: the reference
// the walker is held to.
func decoderField(raw []byte, key string) *field {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	lines := lineCounter{data: raw}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := t.(string)
		start := int(dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if k == key {
			for start < len(raw) && (raw[start] == ':' || raw[start] == ' ' || raw[start] == '\t' || raw[start] == '\r' || raw[start] == '\n') {
				start++
			}
			return &field{raw: v, line: lines.at(start)}
		}
	}
	return nil
}

// decoderItems is jsonItems as a json.Decoder reads the array.
func decoderItems(raw []byte) (items []string, lines []int) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	lc := lineCounter{data: raw}
	if _, err := dec.Token(); err != nil {
		return nil, nil
	}
	for dec.More() {
		start := int(dec.InputOffset())
		start += leadingSpace(raw[start:])
		if start < len(raw) && raw[start] == ',' {
			start++
			start += leadingSpace(raw[start:])
		}
		var item json.RawMessage
		if err := dec.Decode(&item); err != nil {
			return items, lines
		}
		items, lines = append(items, string(item)), append(lines, lc.at(start))
	}
	return items, lines
}

// checkJSONWalkers decodes each JSON value of data as the scanner does
// and fails where jsonField or jsonItems read it otherwise than the
// decoder, in the value and in the lists and fields below it.
func checkJSONWalkers(t *testing.T, data []byte) int {
	t.Helper()
	compared := 0
	var walk func(raw []byte, depth int)
	walk = func(raw []byte, depth int) {
		if depth > 8 {
			return
		}
		compared++
		for _, k := range []string{"apiVersion", "kind", "metadata", "items", "data", "spec"} {
			got, want := jsonField(raw, k), decoderField(raw, k)
			if (got == nil) != (want == nil) || got != nil && (!bytes.Equal(got.raw, want.raw) || got.line != want.line) {
				t.Fatalf("jsonField(%.200q, %q) = %+v, the decoder reads %+v", raw, k, got, want)
			}
			if got != nil {
				walk(got.raw, depth+1)
			}
		}
		var items []string
		var lines []int
		jsonItems(raw, func(item []byte, line int) {
			items, lines = append(items, string(item)), append(lines, line)
		})
		wantItems, wantLines := decoderItems(raw)
		if firstNonSpace(raw) != '[' {
			wantItems, wantLines = nil, nil // the scanner walks arrays only
		}
		if !slices.Equal(items, wantItems) || !slices.Equal(lines, wantLines) {
			t.Fatalf("jsonItems(%.200q) = %q at %v, the decoder reads %q at %v", raw, items, lines, wantItems, wantLines)
		}
		for _, it := range items {
			walk([]byte(it), depth+1)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return compared
		}
		walk(raw, 0)
	}
}

// TestJSONWalkersAgreeWithDecoder holds the walkers of checked JSON to
// encoding/json's decoder on every JSON file of the corpus, and on
// escapes, whitespace and nesting the corpus lacks.
func TestJSONWalkersAgreeWithDecoder(t *testing.T) {
	for _, s := range []string{
		`{"api\u0056ersion": "v1", "kind" : "List", "items" :` + "\r\n" + ` [ {"a":"x\"}]"} ,` + "\n" + `[1, 2.5e3, true, null, "]"], {}, [] ] }`,
		`{"items":{"a":[]},"apiVersion":1,"apiVersion":"dup"}`,
		`[ ]`, `{ }`, `"x"`, `12`, "[\n{\"kind\":\"\\\\\"}\n,\n\t{}]",
		`{"metadata":{"name":"a","items":[1]},"items":[{"items":[{"apiVersion":"x"}]}]}`,
	} {
		checkJSONWalkers(t, []byte(s))
	}
	dir := corpus(t)
	compared := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		compared += checkJSONWalkers(t, bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d JSON values compared", compared)
	if compared < 100 {
		t.Errorf("only %d JSON values compared", compared)
	}
}

// checkJSONOneValue fails where scanJSON, which reads a file of one valid
// value without a decoder, reports otherwise than the decoder's stream
// reader.
func checkJSONOneValue(t *testing.T, s *ManifestScanner, data []byte) bool {
	t.Helper()
	if c := firstNonSpace(data); c != '{' && c != '[' {
		return false
	}
	var got, want ManifestResult
	gotOK, wantOK := s.scanJSON("f", data, 0, &got), s.scanJSONStream("f", data, 0, &want)
	if gotOK != wantOK || !reflect.DeepEqual(got, want) {
		t.Fatalf("scanJSON(%.200q) = %v %+v, the stream reader %v %+v", data, gotOK, got, wantOK, want)
	}
	return true
}

// TestJSONOneValueAgreesWithStream holds scanJSON's path for one valid
// value to the decoder's stream reader on every JSON file of the corpus.
func TestJSONOneValueAgreesWithStream(t *testing.T) {
	s := &ManifestScanner{}
	s.init()
	for _, d := range []string{"{}", " [ ] \n", "{\"kind\":\"List\",\"items\":[{\"apiVersion\":\"batch/v1beta1\",\"kind\":\"CronJob\"}]}\n\n", "{}{}", "{\"a\":1} x", "[1,"} {
		checkJSONOneValue(t, s, []byte(d))
	}
	files := 0
	err := filepath.WalkDir(corpus(t), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if checkJSONOneValue(t, s, bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))) {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 30 {
		t.Errorf("only %d JSON files compared", files)
	}
}
