package crdmigrate

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeCheckpoint feeds arbitrary ConfigMap data to the checkpoint
// decoder. Whatever it accepts must be a checkpoint a run could have
// written: a resumed run trusts it to skip objects.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(`{"crd":"widgets.example.com","crdUID":"u","storageVersion":"v2","runID":"r","phase":"Migrating","continue":"c","total":1200,"processed":500,"rewritten":499,"gone":1,"pages":1}`)
	f.Add(`{"crd":"widgets.example.com","crdUID":"u","storageVersion":"v2","runID":"r","phase":"Rewritten","total":3,"processed":3,"unchanged":3,"pages":1}`)
	f.Add(`{"crd":"widgets.example.com","phase":"Rewritten","total":10,"processed":0}`)
	f.Add(`{"crd":"widgets.example.com","phase":"Migrating","total":-1,"processed":-1,"rewritten":-1}`)
	f.Add(`{"crd":"widgets.example.com","phase":"Migrating","total":9223372036854775807,"processed":9223372036854775807,"rewritten":9223372036854775807,"gone":1}`)
	f.Add(`{"crd":"other.example.com","phase":"Migrating"}`)
	f.Add(`not json`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, data string) {
		cp, ok := decodeCheckpoint("widgets.example.com", data)
		if !ok {
			if cp != nil {
				t.Fatalf("rejected checkpoint returned %+v", cp)
			}
			return
		}
		if cp.CRD != "widgets.example.com" {
			t.Fatalf("accepted a checkpoint of %q", cp.CRD)
		}
		if cp.Phase != PhaseMigrating && cp.Phase != PhaseRewritten {
			t.Fatalf("accepted phase %q", cp.Phase)
		}
		for _, n := range []int64{cp.Total, cp.Processed, cp.Rewritten, cp.Unchanged, cp.Conflicts, cp.Gone, cp.Pages, int64(cp.Restarts)} {
			if n < 0 {
				t.Fatalf("accepted a negative counter: %+v", cp)
			}
		}
		if cp.Rewritten+cp.Unchanged+cp.Conflicts+cp.Gone != cp.Processed || cp.Processed > cp.Total {
			t.Fatalf("accepted counters that do not add up: %+v", cp)
		}
		if cp.Phase == PhaseRewritten && cp.Processed != cp.Total {
			t.Fatalf("accepted a Rewritten checkpoint with work left: %+v", cp)
		}
		// What a run saves, it reads back the same.
		raw, err := json.Marshal(cp)
		if err != nil {
			t.Fatal(err)
		}
		again, ok := decodeCheckpoint("widgets.example.com", string(raw))
		if ok {
			// Times are kept to the second.
			for _, c := range []*Checkpoint{cp, again} {
				c.StartedAt.Time = c.StartedAt.Truncate(time.Second)
				c.UpdatedAt.Time = c.UpdatedAt.Truncate(time.Second)
			}
		}
		if !ok || !reflect.DeepEqual(again, cp) {
			t.Fatalf("round trip: %+v -> %s -> %+v (%v)", cp, raw, again, ok)
		}
	})
}

// A checkpoint whose phase or counters do not add up is not resumed from:
// the run starts over instead of skipping objects on its word.
func TestDecodeCheckpointRejectsInconsistent(t *testing.T) {
	const crd = "widgets.example.com"
	good := `{"crd":"widgets.example.com","phase":"Migrating","continue":"c","total":1200,"processed":500,"rewritten":500,"pages":1}`
	if _, ok := decodeCheckpoint(crd, good); !ok {
		t.Fatalf("a checkpoint a run writes was rejected: %s", good)
	}
	for name, data := range map[string]string{
		"rewritten with work left": `{"crd":"widgets.example.com","phase":"Rewritten","total":10,"processed":0}`,
		"rewritten with a token":   `{"crd":"widgets.example.com","phase":"Rewritten","continue":"c","total":1,"processed":1,"rewritten":1}`,
		"unknown phase":            `{"crd":"widgets.example.com","phase":"Done","total":1,"processed":1,"rewritten":1}`,
		"outcomes do not sum":      `{"crd":"widgets.example.com","phase":"Migrating","total":9,"processed":5,"rewritten":1}`,
		"processed past total":     `{"crd":"widgets.example.com","phase":"Migrating","total":4,"processed":5,"rewritten":5}`,
		"negative":                 `{"crd":"widgets.example.com","phase":"Migrating","total":0,"processed":-1,"rewritten":-1}`,
		"overflowing":              `{"crd":"widgets.example.com","phase":"Migrating","total":9223372036854775807,"processed":9223372036854775806,"rewritten":9223372036854775807,"gone":1}`,
		"too many restarts":        `{"crd":"widgets.example.com","phase":"Migrating","restarts":99}`,
		"another CRD":              `{"crd":"gadgets.example.com","phase":"Migrating"}`,
	} {
		if cp, ok := decodeCheckpoint(crd, data); ok {
			t.Errorf("%s: accepted %+v", name, cp)
		}
	}
}
