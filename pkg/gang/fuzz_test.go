package gang

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzReadNodeRecord: a node's drain annotations can be edited by anyone
// who can patch nodes; reading them back never panics, and the budget and
// on-timeout flags never panic either.
func FuzzReadNodeRecord(f *testing.F) {
	f.Add("drain-1", "Draining", "true", "2026-01-01T10:00:00Z", `[{"kind":"JobSet","namespace":"ml","name":"llm","state":"Stopped"}]`, "25%")
	f.Add("", "", "maybe", "yesterday", `[{"kind":1}]`, "-3")
	f.Add("x", "\xff", "", "", `[`+`[`+`]]`, "101%")
	f.Fuzz(func(t *testing.T, runID, state, cordoned, at, gangs, budget string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{
			AnnRunID: runID, AnnState: state, AnnWasCordoned: cordoned, AnnStartedAt: at, AnnUpdatedAt: at, AnnGangs: gangs,
		}}}
		r := ReadNodeRecord(n, nil)
		if r.RunID != runID || r.Node != "n" {
			t.Fatalf("record %+v", r)
		}
		if b, err := ParseBudget(budget); err == nil {
			// -1 is "no limit", for an unset budget only.
			if got := b.Of(1000); got < 0 && (got != -1 || !b.IsZero()) {
				t.Fatalf("budget %q of 1000 is %d", budget, got)
			}
		}
		_, _ = ParseOnTimeout(state)
	})
}
