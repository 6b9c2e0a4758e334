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
	for _, tc := range []struct {
		cmd       *cobra.Command
		want, not []string
	}{
		{offline, []string{"0    printed", "2    usage", "130"}, []string{"  1 ", "  3 ", "  4 ", "--fail-on"}},
		{check, []string{"nothing at or above --fail-on", "  3 ", "130 > 2 > 3 > 1 > 0"}, []string{"  4 "}},
		{mutating, []string{"  4    stopped", "130 > 2 > 3 > 4 > 1 > 0"}, []string{"--fail-on"}},
		{plain, []string{"0    ran fully; no findings", "  3 "}, []string{"--fail-on", "  4 "}},
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
