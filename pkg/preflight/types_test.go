package preflight

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"
)

// A gate's status is written as the table's word in lower case (ok, warn,
// unknown, fail), in JSON and in YAML; the words of earlier releases
// (PASS, WARN, UNKNOWN, FAIL) still read, so a saved baseline loads; any
// other word is refused.
func TestStatusJSONWords(t *testing.T) {
	for st, word := range map[Status]string{StatusPass: "ok", StatusWarn: "warn", StatusUnknown: "unknown", StatusFail: "fail"} {
		b, err := json.Marshal(Gate{Name: "g", Status: st})
		if want := `{"name":"g","status":"` + word + `","message":""}`; err != nil || string(b) != want {
			t.Errorf("%s: %s (%v), want %s", st, b, err, want)
		}
		y, err := yaml.Marshal(Gate{Name: "g", Status: st})
		if want := "message: \"\"\nname: g\nstatus: " + word + "\n"; err != nil || string(y) != want {
			t.Errorf("%s: YAML %q (%v), want %q", st, y, err, want)
		}
		for _, in := range []string{word, string(st)} {
			var g Gate
			if err := json.Unmarshal([]byte(`{"status":"`+in+`"}`), &g); err != nil || g.Status != st {
				t.Errorf("status %q read as %q (%v), want %s", in, g.Status, err, st)
			}
		}
	}
	for _, bad := range []string{"Pass", "OK", "edge"} {
		var g Gate
		if err := json.Unmarshal([]byte(`{"status":"`+bad+`"}`), &g); err == nil {
			t.Errorf("status %q read as %q, want an error", bad, g.Status)
		}
	}
}
