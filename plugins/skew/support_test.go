package skew

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// runKubectl is run with the local kubectl at another version, so that a
// cluster on an old minor has no kubectl finding of its own.
func runKubectl(t *testing.T, kubectl string, cg cli.ClientGetter, args ...string) result {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	d := testDeps()
	d.kubectl = func(context.Context) (string, error) { return kubectl, nil }
	cmd := newCmd(cg, streams, d)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	var fe *cli.FindingsError
	if err != nil && !errors.As(err, &fe) {
		errOut.WriteString("error: " + err.Error() + "\n")
	}
	return result{Out: out.String(), Err: errOut.String(), Code: cli.ExitCode(err)}
}

// oneMinorCluster is a cluster whose apiserver and kubelets are all at server.
func oneMinorCluster(server string) cli.ClientGetter {
	c := fake.NewClientset(gpuNode("a-0", "a", server), gpuNode("a-1", "a", server))
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: server}
	return getter(c)
}

func summaryOf(t *testing.T, out string) Summary {
	t.Helper()
	var rep SkewReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return rep.Summary
}

// Every exit 1 is named by the summary: a support window past its end is
// counted there, not hidden behind "0 violations".
func TestSupportWindowInSummary(t *testing.T) {
	// Now is 2026-12-02. Upstream 1.33 ended 2026-06-28; EKS standard
	// support for 1.33 ended 2026-07-29, extended runs to 2027-07-29.
	t.Run("eks extended support is a warning named in the summary", func(t *testing.T) {
		// -o wide: the default table shortens the message to fit.
		r := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5-eks-3025e55"), "-o", "wide")
		if r.Code != 0 {
			t.Fatalf("exit %d, want 0 (extended support is a warning)\n%s%s", r.Code, r.Out, r.Err)
		}
		for _, want := range []string{"extended support until 2027-07-29 (239 days)", "support at the edge (1.33 in EKS extended support until 2027-07-29)", "WARN"} {
			if !strings.Contains(r.Out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.Out)
			}
		}
		w := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5-eks-3025e55"), "--fail-on", "warning")
		if w.Code != 1 || !strings.Contains(w.Out, "support at the edge") {
			t.Errorf("--fail-on warning: exit %d, want 1 named in the summary\n%s", w.Code, w.Out)
		}
		j := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5-eks-3025e55"), "-o", "json")
		s := summaryOf(t, j.Out)
		if s.SupportAtEdge != 1 || s.OutOfSupport != 0 || s.SupportWindow != "1.33 in EKS extended support until 2027-07-29" || s.DaysToSupportEnd == nil || *s.DaysToSupportEnd != 239 {
			t.Errorf("json summary %+v", s)
		}
	})
	t.Run("upstream past end of life exits 1 and the summary says why", func(t *testing.T) {
		r := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5"))
		if r.Code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", r.Code, r.Out, r.Err)
		}
		if !strings.Contains(r.Out, "0 violations") || !strings.Contains(r.Out, "; 1 out of support (1.33 out of support since 2026-06-28)") {
			t.Errorf("summary does not name the support window:\n%s", r.Out)
		}
		for _, o := range []string{"json", "yaml"} {
			j := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5"), "-o", o)
			if j.Code != 1 || !strings.Contains(j.Out, "outOfSupport") || !strings.Contains(j.Out, "1.33 out of support since 2026-06-28") {
				t.Errorf("-o %s: exit %d, summary lacks outOfSupport:\n%s", o, j.Code, j.Out)
			}
		}
		s := summaryOf(t, runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5"), "-o", "json").Out)
		if s.OutOfSupport != 1 || s.Violations != 0 || s.Findings != 1 {
			t.Errorf("summary %+v: want outOfSupport 1, violations 0, findings 1", s)
		}
	})
	t.Run("eks past extended support is out of support", func(t *testing.T) {
		r := runKubectl(t, "v1.30.1", oneMinorCluster("v1.30.9-eks-3025e55"), "-o", "wide")
		if r.Code != 1 || !strings.Contains(r.Out, "EKS extended support ended on 2026-07-23") || !strings.Contains(r.Out, "1 out of support") {
			t.Errorf("exit %d:\n%s", r.Code, r.Out)
		}
	})
	t.Run("a fleet policy violation is named too", func(t *testing.T) {
		r := runKubectl(t, "v1.35.1", oneMinorCluster("v1.35.2"), "--policy", "n")
		if r.Code != 1 || !strings.Contains(r.Out, "1 fleet policy violation") {
			t.Errorf("exit %d:\n%s", r.Code, r.Out)
		}
	})
}

// The support window has its own table: days and dates never sit in the
// SKEW column, whose unit is minors.
func TestSupportWindowOwnCells(t *testing.T) {
	r := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5-eks-3025e55"))
	main, rest, ok := strings.Cut(r.Out, "\n\n")
	if !ok || strings.Contains(main, "support window") {
		t.Fatalf("the skew table still has a support-window row:\n%s", r.Out)
	}
	if !strings.Contains(rest, "SUPPORT   PROVIDER   WINDOW     ENDS         DAYS-LEFT   UPSTREAM-EOL") ||
		!strings.Contains(rest, "1.33      eks        extended   2027-07-29   239         2026-06-28") {
		t.Errorf("support table:\n%s", rest)
	}
}

func TestProviderCalendarFlag(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "providers.yaml")
	// A newer read of the EKS calendar that extends 1.33 further.
	data := "dataDate: \"2026-12-01\"\nproviders:\n- provider: eks\n  source: https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html\n  checked: \"2026-12-01\"\n  standardName: standard support\n  extendedName: extended support\n  releases:\n  - {minor: \"1.33\", endOfStandardSupport: \"2026-12-30\", endOfExtendedSupport: \"2027-12-30\"}\n"
	if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5-eks-3025e55"), "--provider-calendar", f, "-o", "wide")
	if r.Code != 0 || !strings.Contains(r.Out, "EKS standard support ends on 2026-12-30, in 28 days") {
		t.Errorf("exit %d:\n%s%s", r.Code, r.Out, r.Err)
	}
	bad := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5"), "--provider-calendar", filepath.Join(dir, "missing.yaml"))
	if bad.Code != cli.ExitUnavailable || !strings.Contains(bad.Err, "--provider-calendar") {
		t.Errorf("missing file: exit %d, err %q", bad.Code, bad.Err)
	}
	// The calendar subcommand prints both tables, and its provider
	// output is a valid --provider-calendar file.
	c := run(t, oneMinorCluster("v1.33.5"), "", "calendar")
	for _, want := range []string{"END-OF-LIFE", "1.33    2025-04-23   2026-06-28", "eks        1.33    2026-07-29      2027-07-29      extended support", "note: The vendor contradicts itself"} {
		if !strings.Contains(c.Out, want) {
			t.Errorf("calendar lacks %q:\n%s", want, c.Out)
		}
	}
	y := run(t, oneMinorCluster("v1.33.5"), "", "calendar", "--providers", "-o", "yaml")
	if err := os.WriteFile(f, []byte(y.Out), 0o600); err != nil {
		t.Fatal(err)
	}
	again := runKubectl(t, "v1.33.1", oneMinorCluster("v1.33.5-eks-3025e55"), "--provider-calendar", f)
	if again.Code != 0 || !strings.Contains(again.Out, "extended support until 2027-07-29") {
		t.Errorf("round trip: exit %d\n%s%s", again.Code, again.Out, again.Err)
	}
}
