package eviction

import (
	"encoding/json"
	"regexp"
	"testing"
)

// A blocker's kind is written kebab-case, the casing of the suite's
// multi-word enum values ("budget-exhausted"); the CamelCase of earlier
// releases ("BudgetExhausted") still reads; each kind has its own word
// and any other word is refused.
func TestBlockerKindJSONWords(t *testing.T) {
	kebab := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	seen := map[string]BlockerKind{}
	for _, k := range BlockerKinds {
		b, err := json.Marshal(Blocker{Kind: k, Outcome: OutcomeLater})
		if err != nil {
			t.Fatal(err)
		}
		var raw struct{ Kind string }
		if err := json.Unmarshal(b, &raw); err != nil || !kebab.MatchString(raw.Kind) {
			t.Errorf("%s is written %q, want kebab-case", k, raw.Kind)
		}
		if other, dup := seen[raw.Kind]; dup {
			t.Errorf("%s and %s are both written %q", k, other, raw.Kind)
		}
		seen[raw.Kind] = k
		for _, in := range []string{raw.Kind, string(k)} {
			var got Blocker
			if err := json.Unmarshal([]byte(`{"kind":"`+in+`"}`), &got); err != nil || got.Kind != k {
				t.Errorf("kind %q read as %q (%v), want %s", in, got.Kind, err, k)
			}
		}
	}
	if len(seen) != len(blockerWords) {
		t.Errorf("%d kinds listed in BlockerKinds, %d words", len(seen), len(blockerWords))
	}
	var got Blocker
	if err := json.Unmarshal([]byte(`{"kind":"budget_exhausted"}`), &got); err == nil {
		t.Errorf("kind budget_exhausted read as %q, want an error", got.Kind)
	}
}
