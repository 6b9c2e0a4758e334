package cli

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// A file a flag names is refused in the suite's words, exit 3: the flag,
// the path and what is wrong, never the decoder's own text.
func TestInputFileErr(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte(" \n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	_, errMissing := ReadInputFile("--calendar", missing)
	_, errEmpty := ReadInputFile("--calendar", empty)
	var v struct {
		DataDate string `json:"dataDate"`
	}
	decode := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: Deployment\n"), &v)
	if decode == nil {
		t.Fatal("sigs.k8s.io/yaml took an unknown field")
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errMissing, "--calendar " + missing + ": does not exist"},
		{errEmpty, "--calendar " + empty + ": holds nothing to read (0 bytes besides white space)"},
		{InputFileErr("--patches", "deploy.yaml", decode), `--patches deploy.yaml: unknown field "apiVersion"`},
		{InputFileErr("-f", "-", ErrEmptyInput), "-f - (stdin): holds nothing to read (0 bytes besides white space)"},
	} {
		if tc.err == nil {
			t.Errorf("no error, want %q", tc.want)
			continue
		}
		if tc.err.Error() != tc.want || ExitCode(tc.err) != ExitUnavailable {
			t.Errorf("got %q (exit %d), want %q (exit 3)", tc.err, ExitCode(tc.err), tc.want)
		}
	}
	if got := DecodeCause("compat: error converting YAML to JSON: yaml: line 2: did not find expected node content"); got != "compat: line 2: did not find expected node content" {
		t.Errorf("DecodeCause: %q", got)
	}
	if got := DecodeCause("want a list: json: cannot unmarshal object into Go value of type []health.PromQLCheck"); got != "want a list: an object where another type belongs" {
		t.Errorf("DecodeCause kept a Go type: %q", got)
	}
	if got := DecodeCause("json: cannot unmarshal string into Go struct field Calendar.releases of type []skew.Release"); got != "field releases: a string where another type belongs" {
		t.Errorf("DecodeCause kept a Go type: %q", got)
	}
	if got := DecodeCause("rules deploy.yaml: json: unknown field"); got != "rules deploy.yaml: unknown field" {
		t.Errorf("DecodeCause cut a file name: %q", got)
	}
}
