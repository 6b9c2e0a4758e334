package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestArgsErrorsInTheSuitesWords(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restore"}, "error: missing RUN|NODE...: kubectl-test restore RUN|NODE...\nhint: kubectl-test restore --help\n"},
		{[]string{"status", "a", "b"}, "error: too many arguments (a b): kubectl-test status takes [RUN]\nhint: kubectl-test status --help\n"},
	} {
		root, streams, got := newTestPlugin(t)
		noop := func(*cobra.Command, []string) error { return nil }
		root.AddCommand(&cobra.Command{Use: "restore RUN|NODE...", Args: MinimumArgs(1), RunE: noop},
			&cobra.Command{Use: "status [RUN]", Args: MaximumArgs(1), RunE: noop})
		root.SetArgs(tc.args)
		if code := Run(context.Background(), root, streams); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if out, errOut := got(); out != "" || errOut != tc.want {
			t.Errorf("%v: stdout %q stderr %q, want %q", tc.args, out, errOut, tc.want)
		}
	}
}

func TestExitCodesForListsOnlyWhatTheCommandReturns(t *testing.T) {
	offline := &cobra.Command{Use: "calendar", Annotations: map[string]string{OfflineAnnotation: "true"}}
	check := &cobra.Command{Use: "check"}
	(&FailOnFlag{Value: "warning"}).AddFlags(check)
	mutating := &cobra.Command{Use: "run"}
	mutating.Flags().String("dry-run", "none", "")
	plain := &cobra.Command{Use: "status"}
	// A command that reads a file a flag names can refuse it (3), offline
	// or not; a file it writes is no input.
	offlineFile := &cobra.Command{Use: "compat", Annotations: map[string]string{OfflineAnnotation: "true"}}
	offlineFile.Flags().String("compat", "", "")
	_ = offlineFile.MarkFlagFilename("compat", "yaml")
	offlineSave := &cobra.Command{Use: "xid-catalog", Annotations: map[string]string{OfflineAnnotation: "true"}}
	offlineSave.Flags().String("save", "", "")
	_ = offlineSave.MarkFlagFilename("save", "yaml")
	MarkOutputFile(offlineSave, "save")
	noFindings := &cobra.Command{Use: "runs", Annotations: map[string]string{NoFindingsAnnotation: "true"}}
	plainFile := &cobra.Command{Use: "verify"}
	plainFile.Flags().String("baseline", "", "")
	_ = plainFile.MarkFlagFilename("baseline", "yaml")
	for _, tc := range []struct {
		cmd       *cobra.Command
		want, not []string
	}{
		{offline, []string{"0    printed", "2    usage", "130"}, []string{"  1 ", "  3 ", "  4 ", "--fail-on"}},
		{check, []string{"nothing at or above --fail-on", "  3 ", "130 > 2 > 3 > 1 > 0"}, []string{"  4 "}},
		{mutating, []string{"  4    stopped", "130 > 2 > 3 > 4 > 1 > 0"}, []string{"--fail-on"}},
		{plain, []string{"0    ran fully; no findings", "  3 "}, []string{"--fail-on", "  4 ", "input file", "kubeconfig or input"}},
		{offlineFile, []string{"0    printed", "  3    could not read an input file (missing, empty", "130 > 2 > 3 > 0."}, []string{"  1 ", "  4 ", "cluster"}},
		{offlineSave, []string{"0    printed"}, []string{"  3 ", "When several apply"}},
		{noFindings, []string{"0    ran fully\n", "  3 ", "130 > 2 > 3 > 0."}, []string{"  1 ", "findings", "  4 "}},
		{plainFile, []string{"or could not read an input file", "130 > 2 > 3 > 1 > 0"}, []string{"  4 "}},
	} {
		got := ExitCodesFor(tc.cmd)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no %q in\n%s", tc.cmd.Use, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q in\n%s", tc.cmd.Use, n, got)
			}
		}
	}
}

func TestNamespaceOnACommandWithoutIt(t *testing.T) {
	root := &cobra.Command{Use: "kubectl-test"}
	sub := &cobra.Command{Use: "status", RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(sub)
	root.SetFlagErrorFunc(flagError)
	for _, args := range [][]string{{"status", "-n", "x"}, {"status", "--namespace", "x"}, {"status", "--namespace=x"}} {
		root.SetArgs(args)
		root.SilenceErrors, root.SilenceUsage = true, true
		err := root.Execute()
		if ExitCode(err) != ExitUsage || err.Error() != "kubectl-test status has no -n/--namespace: it works cluster-wide" {
			t.Errorf("%v: %v (exit %d)", args, err, ExitCode(err))
		}
	}
}

func TestWrapSummary(t *testing.T) {
	line := "max skew 0 minors; 10 violations, 0 at the edge, 0 unknown; 1 out of support (1.25 out of support); apiserver v1.37.2, kubelets v1.33.10-gke.100..v1.37.2 on 6 nodes"
	got := WrapSummary(line, 120)
	want := []string{
		"max skew 0 minors; 10 violations, 0 at the edge, 0 unknown; 1 out of support (1.25 out of support);",
		"  apiserver v1.37.2, kubelets v1.33.10-gke.100..v1.37.2 on 6 nodes",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s", strings.Join(got, "\n"))
	}
	for _, l := range got {
		if len(l) > 120 {
			t.Errorf("%d columns: %s", len(l), l)
		}
	}
	if got := WrapSummary("short", 120); len(got) != 1 || got[0] != "short" {
		t.Errorf("short: %q", got)
	}
	long := strings.Repeat("x", 130)
	if got := WrapSummary("a "+long+" b", 120); strings.Join(got, "|") != "a|  "+long+"|  b" {
		t.Errorf("a word longer than the width: %q", got)
	}
}

func TestTableHeadersAreOneWord(t *testing.T) {
	tb := Table{Columns: []Column{{Name: "NODE"}, {Name: "last seen"}}}
	tb.Rows = append(tb.Rows, []string{"n1", "5m"})
	var b strings.Builder
	if err := tb.Print(&b, TableOptions{Width: 120}); err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(b.String(), "\n", 2)[0]; len(strings.Fields(first)) != 2 || !strings.Contains(first, "LAST-SEEN") {
		t.Errorf("header %q", first)
	}
}
