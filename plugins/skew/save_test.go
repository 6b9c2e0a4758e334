package skew

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSaveReportKeepsBaselineOnError: a report that cannot be encoded
// (JSON, under YAML, has no infinity: "json: unsupported value: +Inf")
// leaves the baseline already saved whole, and no temporary file; a good
// one replaces it, mode 0600.
func TestSaveReportKeepsBaselineOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "preflight-1.38.yaml")
	if err := os.WriteFile(path, []byte("kind: SkewPreflightReport\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := saveReport(path, map[string]float64{"ttft": math.Inf(1)})
	if err == nil || !strings.Contains(err.Error(), "unsupported value: +Inf") {
		t.Fatalf("error %v, want the encoder's", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "kind: SkewPreflightReport\n" {
		t.Errorf("baseline after a failed save: %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("files left: %v", es)
	}
	if err := saveReport(path, map[string]int{"v": 2}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "v: 2\n" {
		t.Errorf("saved %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("files left: %v", es)
	}
}
