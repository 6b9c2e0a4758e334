package apilifecycle

import "testing"

// The fuzz targets check that no rules file or release string makes the
// parsers panic or hang, and that what they accept is consistent. Seed
// corpora live in testdata/fuzz/<target>/.

func FuzzParseRules(f *testing.F) {
	f.Add([]byte("apiVersion: gpufleet.dev/v1alpha1\nkind: APILifecycleTable\nitems:\n- {group: example.com, version: v1beta1, kind: Widget, deprecated: \"1.30\", removed: \"1.33\"}\n"))
	f.Add([]byte("deprecated-versions:\n- version: example.com/v1beta1\n  kind: Widget\n  deprecated-in: v1.30.0\n  removed-in: v1.33.0\n  replacement-api: example.com/v1\n  component: k8s\n"))
	f.Add([]byte(`[{"group":"example.com","version":"v1beta1","kind":"Widget","removed":"1.33"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRules(data, "fuzz")
		if err != nil {
			return
		}
		for _, e := range r.Entries {
			if e.Version == "" {
				t.Fatalf("entry without a version accepted: %+v", e)
			}
		}
	})
}

func FuzzParseRelease(f *testing.F) {
	for _, s := range []string{"v1.37", "1.37.2", "v1.38.0-rc.1", "+2", "", "v1", "v99999999999999999999.1", " 1.2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRelease(s)
		if err != nil || r.IsZero() {
			return
		}
		again, err := ParseRelease(r.String())
		if err != nil || again != r {
			t.Fatalf("%q parsed as %v, whose String %q parses as %v (%v)", s, r, r.String(), again, err)
		}
	})
}
