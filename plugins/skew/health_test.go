package skew

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestPromQLFlagErrors: a bad --promql-checks file or --prometheus-url is
// one line that says what to fix, exit 2, before anything is read.
func TestPromQLFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.yaml", "- {name: up, expr: up, min: 1}\n")
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--prometheus-url", "http://prom:9090", "--promql-checks", file("nobound.yaml", "- {name: x, expr: up}\n")},
			`error: --promql-checks ` + filepath.Join(dir, "nobound.yaml") + `: check 1: check "x": give exactly one of maxRatio, max or min, got 0`},
		{[]string{"--prometheus-url", "http://prom:9090", "--promql-checks", file("map.yaml", "name: x\n")}, "want a YAML list of {name, expr, maxRatio|max|min}: an object where another type belongs"},
		{[]string{"--prometheus-url", "http://prom:9090", "--promql-checks", filepath.Join(dir, "missing.yaml")}, "--promql-checks " + filepath.Join(dir, "missing.yaml") + ": does not exist"},
		{[]string{"--prometheus-url", "prom:9090", "--promql-checks", good}, `--prometheus-url "prom:9090": want http(s)://HOST[:PORT][/PATH]`},
		{[]string{"--promql-checks", good}, "--prometheus-url and --promql-checks go together"},
		{[]string{"--prometheus-url", "http://prom:9090"}, "--prometheus-url and --promql-checks go together"},
	} {
		r := run(t, getter(cluster("v1.37.2")), "", append([]string{"preflight", "--target", "v1.37"}, tc.args...)...)
		// A checks file that cannot be used is an input refused (3); a
		// flag alone or a bad URL is a usage error (2).
		want := cli.ExitUsage
		if strings.Contains(tc.err, "--promql-checks /") || strings.Contains(tc.err, "want a YAML list") {
			want = cli.ExitUnavailable
		}
		if r.Code != want || !strings.Contains(r.Err, tc.err) || strings.Count(strings.TrimSpace(r.Err), "\n") != 0 || r.Out != "" {
			t.Errorf("%q: exit %d, stderr %q, want exit %d and one line with %q", tc.args, r.Code, r.Err, want, tc.err)
		}
	}
}
