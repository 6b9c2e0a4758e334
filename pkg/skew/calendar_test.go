package skew

import (
	"strings"
	"testing"
	"time"
)

func day(s string) time.Time {
	t, _ := time.Parse(dateLayout, s)
	return t
}

func TestDefaultCalendar(t *testing.T) {
	c := DefaultCalendar()
	if len(c.Releases) != 10 || c.Releases[0].Minor != "1.28" || c.Releases[9].Minor != "1.37" || c.DataDate == "" {
		t.Fatalf("embedded calendar: %+v", c)
	}
	if n, ok := c.Newest(day("2026-12-02")); !ok || n.MinorString() != "1.37" {
		t.Errorf("newest on 2026-12-02 = %v", n)
	}
	if n, _ := c.Newest(day("2026-08-25")); n.MinorString() != "1.36" {
		t.Errorf("newest on 2026-08-25 = %v", n)
	}
}

func TestSupport(t *testing.T) {
	c := DefaultCalendar()
	tests := []struct {
		v, now string
		status Status
		days   int
		behind int
		msg    string
	}{
		{"v1.37.2", "2026-12-02", StatusOK, 330, 0, "supported until 2027-10-28"},
		{"v1.34.1", "2026-09-01", StatusEdge, 56, 3, "reaches end of life on 2026-10-27, in 56 days"},
		{"v1.33.0", "2026-12-02", StatusViolation, -157, 4, "reached end of life on 2026-06-28"},
		{"v1.38.0", "2026-12-02", StatusUnknown, 0, 0, "newer than the release calendar"},
		{"v1.20.0", "2026-12-02", StatusViolation, 0, 17, "past end of life"},
	}
	for _, tc := range tests {
		s := c.Support(MustParseVersion(tc.v), day(tc.now))
		if s.Status != tc.status || s.MinorsBehind != tc.behind || !strings.Contains(s.Message, tc.msg) {
			t.Errorf("%s on %s: %+v", tc.v, tc.now, s)
		}
		if tc.status != StatusUnknown && tc.days != 0 && (s.DaysToEndOfLife == nil || *s.DaysToEndOfLife != tc.days) {
			t.Errorf("%s on %s: days %v, want %d", tc.v, tc.now, s.DaysToEndOfLife, tc.days)
		}
	}
}

func TestParseCalendar(t *testing.T) {
	good := "dataDate: 2027-01-01\nreleases:\n- {minor: '1.38', released: 2026-12-16, endOfLife: 2028-02-28}\n"
	c, err := ParseCalendar([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Support(MustParseVersion("v1.38.0"), day("2027-01-01")); s.Status != StatusOK {
		t.Errorf("1.38 with a newer calendar: %+v", s)
	}
	for _, bad := range []string{
		"", "dataDate: x\nreleases: []", "dataDate: 2027-01-01\nreleases: []",
		"dataDate: 2027-01-01\nreleases:\n- {minor: x, released: 2026-12-16, endOfLife: 2028-02-28}",
		"dataDate: 2027-01-01\nreleases:\n- {minor: '1.1', released: 2026-12-16, endOfLife: 2020-02-28}",
		"dataDate: 2027-01-01\nreleases:\n- {minor: '1.1', released: 2026-12-16, endOfLife: 2028-02-28}\n- {minor: '1.1', released: 2026-12-16, endOfLife: 2028-02-28}",
		"dataDate: 2027-01-01\nbogus: 1\nreleases:\n- {minor: '1.1', released: 2026-12-16, endOfLife: 2028-02-28}",
	} {
		if _, err := ParseCalendar([]byte(bad)); err == nil {
			t.Errorf("ParseCalendar(%q): want an error", bad)
		}
	}
}

func TestFleetPolicy(t *testing.T) {
	for in, lag := range map[string]int{"n": 0, "N-1": 1, "n-2": 2} {
		p, err := ParseFleetPolicy(in)
		if err != nil || p.Lag != lag {
			t.Errorf("ParseFleetPolicy(%q) = %v, %v", in, p, err)
		}
	}
	for _, bad := range []string{"", "n+1", "n-x", "1", "n--1"} {
		if _, err := ParseFleetPolicy(bad); err == nil {
			t.Errorf("ParseFleetPolicy(%q): want an error", bad)
		}
	}
	p := FleetPolicy{Lag: 1}
	newest := MustParseVersion("1.37")
	if f := p.Check(MustParseVersion("v1.36.4"), newest); f.Status != StatusOK {
		t.Errorf("1.36 under n-1: %+v", f)
	}
	if f := p.Check(MustParseVersion("v1.35.4"), newest); f.Status != StatusViolation || f.Skew != 2 {
		t.Errorf("1.35 under n-1: %+v", f)
	}
}

// TestParseCalendarRefusesAnotherKindOfFile: a manifest given as
// --calendar is refused in one line that says what the file should be.
func TestParseCalendarRefusesAnotherKindOfFile(t *testing.T) {
	_, err := ParseCalendar([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"))
	if err == nil || err.Error() != `not a release calendar (unknown field "apiVersion"): print one with kubectl skew calendar -o yaml` {
		t.Errorf("got %v", err)
	}
}
