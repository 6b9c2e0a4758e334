package skew

import "testing"

// The fuzz targets check that no calendar file or version string makes the
// parsers panic or hang. Seed corpora live in testdata/fuzz/<target>/.

func FuzzParseCalendar(f *testing.F) {
	f.Add(embeddedCalendar)
	f.Add([]byte("releases:\n- minor: \"1.37\"\n  released: 2026-04-22\n  endOfLife: 2027-06-28\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseCalendar(data)
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"v1.37.2", "1.36", "v1.35.4-gke.1200", "v1.38.0-rc.1+abc", "", "v", "v1.2.3.4", "v99999999999999999999.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		again, err := ParseVersion(v.String())
		if err != nil || again.Compare(v) != 0 {
			t.Fatalf("%q parsed as %v, whose String %q parses as %v (%v)", s, v, v.String(), again, err)
		}
	})
}

// FuzzParseFleetPolicy: --fleet-policy comes from users' scripts. What
// parses prints back as the same policy, and the lag stays in range.
func FuzzParseFleetPolicy(f *testing.F) {
	for _, s := range []string{"n", "N-1", " n-2 ", "n-0", "n-99", "n-100", "n--1", "n-+1", "n-1x", "n-", "", "n-9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseFleetPolicy(s)
		if err != nil {
			return
		}
		if p.Lag < 0 || p.Lag >= 100 {
			t.Fatalf("%q parsed to lag %d", s, p.Lag)
		}
		again, err := ParseFleetPolicy(p.String())
		if err != nil || again != p {
			t.Fatalf("%q parsed as %v, whose String %q parses as %v (%v)", s, p, p.String(), again, err)
		}
	})
}
