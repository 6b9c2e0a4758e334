package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type streamed struct {
	Header
	Target string  `json:"target"`
	Items  []entry `json:"items"`
	After  []entry `json:"after,omitempty"`
	Count  int     `json:"count"`
}

type entry struct {
	Name  string            `json:"name"`
	Notes []string          `json:"notes,omitempty"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

// WriteJSONItems must print what PrintStructured prints, byte for byte,
// whatever the number of chunks, with fields before and after the items.
func TestWriteJSONItemsMatchesPrintStructured(t *testing.T) {
	for _, n := range []int{0, 1, itemChunk - 1, itemChunk, 3*itemChunk + 7} {
		r := streamed{Header: NewHeader("Test", Metadata{Context: "c"}), Target: "v1.37", Count: n,
			After: []entry{{Name: "tail"}}}
		for i := 0; i < n; i++ {
			e := entry{Name: "p-" + strings.Repeat("x", i%7)}
			if i%3 == 0 {
				e.Notes = []string{"waits <for> & more", "a -> b"}
				e.Attrs = map[string]string{"z": "1", "a": "2"}
			}
			r.Items = append(r.Items, e)
		}
		var want bytes.Buffer
		if err := PrintStructured(&want, OutputJSON, r); err != nil {
			t.Fatal(err)
		}
		head := r
		head.Items = nil
		var got bytes.Buffer
		if err := WriteJSONItems(&got, head, r.Items); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d items: WriteJSONItems differs from PrintStructured (%d vs %d bytes)", n, got.Len(), want.Len())
		}
		if n > 0 && !strings.Contains(got.String(), "waits <for> & more") {
			t.Error("HTML characters escaped")
		}
	}
}

func TestWriteJSONItemsNeedsOneHole(t *testing.T) {
	if err := WriteJSONItems(&bytes.Buffer{}, struct{ X int }{}, []entry{{Name: "a"}}); err == nil {
		t.Error("a head without a null items field was accepted")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteJSONItemsWriteError(t *testing.T) {
	items := make([]entry, 3*itemChunk)
	err := WriteJSONItems(failWriter{}, streamed{}, items)
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("err = %v, want the write error", err)
	}
}

// appendIndented must write exactly what json.Indent writes for compact
// encoding/json output, escapes and empty containers included.
func TestAppendIndentedMatchesJSONIndent(t *testing.T) {
	for _, v := range []any{
		map[string]any{},
		[]any{},
		map[string]any{"a": []any{}, "b": map[string]any{}, "c": "x\"y\\", "d": `\\"`},
		[]any{1, "two", nil, true, []any{[]any{}}, map[string]any{"k:,{[": "]}\"\\\\"}},
		"plain",
		3.5,
	} {
		compact, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact, "    ", "  "); err != nil {
			t.Fatal(err)
		}
		if got := appendIndented(nil, compact, "    ", "  "); string(got) != want.String() {
			t.Errorf("appendIndented(%s):\n%s\nwant\n%s", compact, got, want.String())
		}
	}
}
