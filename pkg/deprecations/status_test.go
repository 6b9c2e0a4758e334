package deprecations

import (
	"encoding/json"
	"testing"
)

// A finding's status is written in the suite's words (fail, warn,
// unknown) and read in them or in gpufleet.dev/v1alpha1's (removed,
// deprecated, unknown), so a saved report still loads.
func TestStatusJSON(t *testing.T) {
	for st, word := range map[Status]string{StatusRemoved: "fail", StatusDeprecated: "warn", StatusUnknown: "unknown"} {
		b, err := json.Marshal(Finding{Status: st})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Status != word {
			t.Errorf("%s written as %q (%v), want %q", st, got.Status, err, word)
		}
		for _, in := range []string{word, string(st)} {
			var f Finding
			if err := json.Unmarshal([]byte(`{"status":"`+in+`"}`), &f); err != nil || f.Status != st {
				t.Errorf("%q read as %q (%v), want %q", in, f.Status, err, st)
			}
		}
	}
	var f Finding
	if err := json.Unmarshal([]byte(`{"status":"REMOVED"}`), &f); err == nil {
		t.Errorf("REMOVED read as %q, want an error", f.Status)
	}
}
