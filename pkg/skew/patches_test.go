package skew

import (
	"strings"
	"testing"
)

func TestDefaultPatches(t *testing.T) {
	c := DefaultCalendar()
	p := c.Patches
	if p.DataDate == "" || p.Source == "" || len(p.Minors) == 0 {
		t.Fatalf("embedded patch table: %+v", p)
	}
	// Every minor of the calendar has its newest patch, released inside
	// the minor's window; a row marked final is past end of life.
	for _, r := range c.Releases {
		lp, ok := c.LatestPatch(r.minor)
		if !ok {
			t.Errorf("no newest patch for %s", r.Minor)
			continue
		}
		if lp.released.Before(r.released) {
			t.Errorf("%s: newest patch %s released %s, before the minor (%s)", r.Minor, lp.Version, lp.Released, r.Released)
		}
		if lp.Final && !r.endOfLife.Before(day(p.DataDate)) {
			t.Errorf("%s: marked final but supported until %s", r.Minor, r.EndOfLife)
		}
	}
	if lp, ok := c.LatestPatch(MustParseVersion("v1.37.0-rc.1")); !ok || lp.Version != "1.37.2" {
		t.Errorf("LatestPatch(1.37) = %+v, %v", lp, ok)
	}
	// A --calendar file keeps the embedded patch table.
	cal, err := ParseCalendar([]byte("dataDate: 2027-01-01\nreleases:\n- {minor: '1.37', released: 2026-08-26, endOfLife: 2027-10-28}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cal.LatestPatch(MustParseVersion("1.37")); !ok {
		t.Error("a parsed calendar lost the embedded patch table")
	}
}

func TestPatchLag(t *testing.T) {
	c := DefaultCalendar()
	tests := []struct {
		v, now        string
		status        Status
		patches, days int
		atLeast       bool
		msg           string
	}{
		// On the newest patch on the day the data knows it.
		{"v1.37.2", "2026-10-27", StatusOK, 0, 0, false, "on the newest patch release"},
		// Later, a newer patch may exist: not claimed current.
		{"v1.37.2", "2026-12-04", StatusUnknown, 0, 0, true, "newest patch known as of 2026-10-27 (38 days ago)"},
		// One behind: the newest is the very next patch, so the days are
		// exact; the count is a lower bound once the data is old.
		{"v1.37.1", "2026-10-30", StatusInfo, 1, 3, true, "3 days and at least 1 patch release behind v1.37.2"},
		{"v1.37.1", "2026-10-27", StatusInfo, 1, 0, false, "0 days and 1 patch release behind v1.37.2"},
		// Several behind: the first newer patch is not in the data.
		{"v1.37.0", "2026-12-04", StatusInfo, 2, 38, true, "at least 38 days and at least 2 patch releases"},
		// A final minor: the count is exact, the days a lower bound.
		{"v1.32.10", "2026-12-04", StatusInfo, 3, 281, true, "at least 281 days and 3 patch releases behind v1.32.13"},
		{"v1.32.13", "2026-12-04", StatusOK, 0, 0, false, "the last patch release of 1.32"},
		// Vendor suffixes are not pre-releases.
		{"v1.30.2-gke.1587003", "2025-06-17", StatusInfo, 12, 0, true, "at least 0 days and 12 patch releases"},
		// A pre-release of the newest patch is one behind it.
		{"v1.37.2-rc.1", "2026-10-27", StatusInfo, 1, 0, false, "0 days and 1 patch release behind"},
		{"v1.38.0", "2026-12-04", StatusUnknown, 0, 0, false, "does not list 1.38"},
		{"v1.37.3", "2026-12-04", StatusUnknown, 0, 0, false, "newer than v1.37.2"},
		{"v1.37", "2026-12-04", StatusUnknown, 0, 0, false, "no patch number"},
		{"v1.37.1", "2026-10-01", StatusUnknown, 0, 0, false, "after the clock"},
	}
	for _, tc := range tests {
		l := c.PatchLag(MustParseVersion(tc.v), day(tc.now))
		if l.Status != tc.status || l.PatchesBehind != tc.patches || l.DaysBehind != tc.days || l.AtLeast != tc.atLeast || !strings.Contains(l.Message, tc.msg) {
			t.Errorf("%s on %s: %+v", tc.v, tc.now, l)
		}
		if l.DataDate != c.Patches.DataDate {
			t.Errorf("%s: data date %q", tc.v, l.DataDate)
		}
	}
}

func TestParsePatches(t *testing.T) {
	good := "dataDate: 2027-01-10\nsource: test\nminors:\n- {minor: '1.38', version: 1.38.1, released: 2027-01-06}\n- {minor: '1.37', version: 1.37.5, released: 2027-01-06, asOf: 2027-01-08}\n"
	p, err := ParsePatches([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if p.Minors[0].Minor != "1.37" {
		t.Errorf("rows not sorted by minor: %+v", p.Minors)
	}
	c := DefaultCalendar().WithPatches(p)
	// asOf defaults to dataDate: on 2027-01-10 1.38.1 is current.
	if l := c.PatchLag(MustParseVersion("v1.38.1"), day("2027-01-10")); l.Status != StatusOK || l.AsOf != "2027-01-10" {
		t.Errorf("1.38.1 with newer data: %+v", l)
	}
	if l := c.PatchLag(MustParseVersion("v1.37.5"), day("2027-01-10")); l.Status != StatusUnknown || !l.AtLeast {
		t.Errorf("1.37.5 two days after its asOf: %+v", l)
	}
	if _, ok := c.LatestPatch(MustParseVersion("1.36")); ok {
		t.Error("WithPatches kept rows of the old table")
	}
	for _, bad := range []string{
		"",
		"dataDate: x\nminors: [{minor: '1.38', version: 1.38.1, released: 2027-01-06}]",
		"dataDate: 2027-01-10\nminors: []",
		"dataDate: 2027-01-10\nbogus: 1\nminors: [{minor: '1.38', version: 1.38.1, released: 2027-01-06}]",
		"dataDate: 2027-01-10\nminors: [{minor: x, version: 1.38.1, released: 2027-01-06}]",
		"dataDate: 2027-01-10\nminors: [{minor: '1.38', version: '1.38', released: 2027-01-06}]",
		"dataDate: 2027-01-10\nminors: [{minor: '1.38', version: 1.38.1-rc.0, released: 2027-01-06}]",
		"dataDate: 2027-01-10\nminors: [{minor: '1.38', version: 1.37.1, released: 2027-01-06}]",
		"dataDate: 2027-01-10\nminors: [{minor: '1.38', version: 1.38.1, released: 6 Jan}]",
		"dataDate: 2027-01-10\nminors: [{minor: '1.38', version: 1.38.1, released: 2027-01-06, asOf: 2027-01-05}]",
		"dataDate: 2027-01-10\nminors: [{minor: '1.38', version: 1.38.1, released: 2027-01-06, asOf: 2027-01-11}]",
		"dataDate: 2027-01-10\nminors: [{minor: '1.38', version: 1.38.1, released: 2027-01-06}, {minor: '1.38', version: 1.38.2, released: 2027-01-06}]",
	} {
		if _, err := ParsePatches([]byte(bad)); err == nil {
			t.Errorf("ParsePatches(%q): want an error", bad)
		}
	}
}
