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
