package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzReadAnswer writes any bytes as ready.json: the agent never panics,
// and reports ready only for a whole JSON object that does not name
// another request.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{`{"id":"r1","step":3,"uri":"s3://x"}`, `{"step":"7"}`, `{"id":"r0"}`, `{"id":"r1","st`, ``, `null`, `[]`, `{"step":[1]}`, `{"step":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ReadyFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		a, _ := Dir(dir).ReadAnswer("r1", time.Time{})
		if a.Kind == AnswerNone {
			return
		}
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if d.Decode(&m) != nil || m == nil {
			t.Fatalf("ready from bytes that are not a JSON object: %q", data)
		}
		if id, ok := m["id"].(string); ok && id != "" && id != "r1" {
			t.Fatalf("ready for another request: %q", data)
		}
	})
}
