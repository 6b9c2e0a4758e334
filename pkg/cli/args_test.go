package cli

import (
	"context"
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
