package fleetfile

import (
	"testing"
	"time"
)

func la(t *testing.T, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWindowOpenAt(t *testing.T) {
	w := Window{Schedule: "0 1 * * 1-5", Duration: "4h", TimeZone: "America/Los_Angeles", FinishMargin: "15m"}
	cases := []struct {
		at   string
		open bool
		end  string
	}{
		{"2026-11-02 00:59", false, ""}, // Monday before the window
		{"2026-11-02 01:00", true, "2026-11-02 05:00"},
		{"2026-11-02 04:59", true, "2026-11-02 05:00"},
		{"2026-11-02 05:00", false, ""},
		{"2026-11-07 02:00", false, ""}, // Saturday
	}
	for _, tc := range cases {
		o, ok := w.OpenAt(la(t, tc.at))
		if ok != tc.open {
			t.Errorf("%s: open %v, want %v", tc.at, ok, tc.open)
			continue
		}
		if ok && !o.End.Equal(la(t, tc.end)) {
			t.Errorf("%s: ends %s, want %s", tc.at, o.End, tc.end)
		}
	}
}

// TestWindowDST: the window is read in its own zone. A 01:00 window is
// 09:00 UTC in winter and 08:00 UTC in summer. On the spring-forward night
// (2026-03-08, 02:00-03:00 does not exist in Los Angeles) a 02:30 window
// does not open at all: robfig/cron skips a time that does not exist, so
// the next opening is the next night (plan shows it).
func TestWindowDST(t *testing.T) {
	w := Window{Schedule: "0 1 * * *", Duration: "2h", TimeZone: "America/Los_Angeles"}
	o, ok := w.NextOpening(time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC), time.Hour)
	if !ok || o.Start.UTC() != time.Date(2026, 3, 7, 9, 0, 0, 0, time.UTC) {
		t.Errorf("winter opening %v", o.Start.UTC())
	}
	o, ok = w.NextOpening(time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC), time.Hour)
	if !ok || o.Start.UTC() != time.Date(2026, 3, 9, 8, 0, 0, 0, time.UTC) {
		t.Errorf("summer opening %v", o.Start.UTC())
	}
	skipped := Window{Schedule: "30 2 * * *", Duration: "1h", TimeZone: "America/Los_Angeles"}
	o, ok = skipped.NextOpening(la(t, "2026-03-08 00:00"), 30*time.Minute)
	if !ok || !o.Start.Equal(la(t, "2026-03-09 02:30")) {
		t.Errorf("spring-forward opening %v", o.Start)
	}
	// Fall back (2026-11-01 01:00 happens twice): the window opens once.
	o, ok = w.NextOpening(la(t, "2026-10-31 23:00"), time.Hour)
	if !ok || o.Start.UTC() != time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC) {
		t.Errorf("fall-back opening %v", o.Start.UTC())
	}
}

func TestWindowNextOpeningNeedsRoom(t *testing.T) {
	w := Window{Schedule: "0 1 * * 1-5", Duration: "4h", TimeZone: "America/Los_Angeles", FinishMargin: "15m"}
	// Monday 03:30: open, but 1h30 left is less than a 1h step plus the
	// 15m margin? No: 1h15 fits. At 04:00 it does not: Tuesday 01:00.
	if o, ok := w.NextOpening(la(t, "2026-11-02 03:30"), time.Hour); !ok || !o.Start.Equal(la(t, "2026-11-02 01:00")) {
		t.Errorf("03:30: %v", o.Start)
	}
	if o, ok := w.NextOpening(la(t, "2026-11-02 04:00"), time.Hour); !ok || !o.Start.Equal(la(t, "2026-11-03 01:00")) {
		t.Errorf("04:00: %v", o.Start)
	}
	// Friday evening: next Monday.
	if o, ok := w.NextOpening(la(t, "2026-11-06 18:00"), time.Hour); !ok || !o.Start.Equal(la(t, "2026-11-09 01:00")) {
		t.Errorf("Friday: %v", o.Start)
	}
	never := Window{Schedule: "0 1 30 2 *", Duration: "4h"}
	if _, ok := never.NextOpening(la(t, "2026-11-02 00:00"), time.Hour); ok {
		t.Error("February 30th opened")
	}
}

func TestFreezeSpan(t *testing.T) {
	f := Freeze{Start: "2026-12-20", End: "2027-01-04"}
	if !f.Holds(time.Date(2027, 1, 4, 23, 59, 0, 0, time.UTC)) {
		t.Error("a date end is inclusive")
	}
	if f.Holds(time.Date(2027, 1, 5, 0, 0, 0, 0, time.UTC)) || f.Holds(time.Date(2026, 12, 19, 23, 0, 0, 0, time.UTC)) {
		t.Error("holds outside")
	}
	g := Freeze{Start: "2026-12-20T18:00:00Z", End: "2026-12-21T06:00:00Z"}
	if g.Holds(time.Date(2026, 12, 21, 6, 0, 0, 0, time.UTC)) {
		t.Error("a time end is exclusive")
	}
}

func TestExpandCommand(t *testing.T) {
	got, err := ExpandCommand(`upgrade --pool {{.Pool}} --note "a b {{.Cluster}}" --v={{.Version}}`, CommandVars{Pool: "gpu a", Cluster: "c1", Version: "v1.38"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"upgrade", "--pool", "gpu a", "--note", "a b c1", "--v=v1.38"}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("word %d: %q, want %q", i, got[i], want[i])
		}
	}
	if err := CheckCommandTemplate("x {{.Nope}}"); err == nil {
		t.Error("an unknown field passed")
	}
}
