package crdmigrate

import (
	"encoding/json"
	"testing"
)

// A webhook's health is written in the suite's words (ok, fail, unknown)
// and read in them or in gpufleet.dev/v1alpha1's (OK, Down, Unknown), so
// a saved status report still loads.
func TestWebhookHealthJSON(t *testing.T) {
	for _, c := range []struct {
		h         HealthState
		word, old string
		tableWord string
	}{{HealthOK, "ok", "OK", "OK"}, {HealthDown, "fail", "Down", "FAIL"}, {HealthUnknown, "unknown", "Unknown", "UNKNOWN"}} {
		b, err := json.Marshal(WebhookHealth{Health: c.h})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Health string `json:"health"`
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Health != c.word {
			t.Errorf("%s written as %q (%v), want %q", c.h, got.Health, err, c.word)
		}
		if w := c.h.Word().String(); w != c.tableWord {
			t.Errorf("%s prints %s, want %s", c.h, w, c.tableWord)
		}
		for _, in := range []string{c.word, c.old} {
			var h WebhookHealth
			if err := json.Unmarshal([]byte(`{"health":"`+in+`"}`), &h); err != nil || h.Health != c.h {
				t.Errorf("%q read as %q (%v), want %q", in, h.Health, err, c.h)
			}
		}
	}
	var h WebhookHealth
	if err := json.Unmarshal([]byte(`{"health":"down"}`), &h); err == nil {
		t.Errorf("down read as %q, want an error", h.Health)
	}
}
