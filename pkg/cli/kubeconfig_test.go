package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
)

// newTestPlugin is a root with the real kubeconfig flags and a subcommand.
func newTestPlugin(t *testing.T) (*cobra.Command, genericiooptions.IOStreams, func() (string, string)) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := &cobra.Command{Use: "kubectl-test", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	pf := NewPrintFlags()
	sub := &cobra.Command{Use: "sub", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return UsageErr(pf.Validate()) }}
	pf.AddFlags(sub)
	root.AddCommand(sub)
	BindFlags(NewClientGetter(streams, ConfigOptions{}), root)
	Setup(root, streams)
	return root, streams, func() (string, string) { return out.String(), errOut.String() }
}

func TestUsageErrorsNameTheSubcommandAndOneWording(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\ncontexts: [{name: a, context: {cluster: a}}]\nclusters: [{name: a, cluster: {server: https://127.0.0.1:1}}]\ncurrent-context: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Config\ncontexts: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	for _, tc := range []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"unknown flag", []string{"sub", "--bogus"}, "error: unknown flag: --bogus\nhint: kubectl-test sub --help\n"},
		{"bad -o", []string{"sub", "-o", "x"}, "error: unknown output format \"x\": want one of table, wide, json, yaml\nhint: kubectl-test sub --help\n"},
		{"dry-run on a read-only command", []string{"sub", "--dry-run=client"},
			"error: unknown flag: --dry-run: kubectl-test sub only reads and changes nothing, so it has no --dry-run\nhint: kubectl-test sub --help\n"},
		{"unknown context", []string{"sub", "--context", "nope"}, "error: context \"nope\" is not in the kubeconfig\nhint: kubectl config get-contexts -o name\n"},
		{"missing kubeconfig", []string{"sub", "--kubeconfig", filepath.Join(dir, "missing")},
			"error: reading kubeconfig " + filepath.Join(dir, "missing") + ": no such file or directory\nhint: kubectl config view --kubeconfig " + filepath.Join(dir, "missing") + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, streams, got := newTestPlugin(t)
			root.SetArgs(tc.args)
			if code := Run(context.Background(), root, streams); code != ExitUsage {
				t.Errorf("exit %d, want 2", code)
			}
			if out, errOut := got(); out != "" || errOut != tc.wantStderr {
				t.Errorf("stdout %q\nstderr %q\nwant   %q", out, errOut, tc.wantStderr)
			}
		})
	}
	t.Run("unparsable kubeconfig", func(t *testing.T) {
		root, streams, got := newTestPlugin(t)
		root.SetArgs([]string{"sub", "--kubeconfig", bad})
		if code := Run(context.Background(), root, streams); code != ExitUsage {
			t.Errorf("exit %d, want 2", code)
		}
		if _, errOut := got(); !regexpLines(errOut, `^error: reading kubeconfig: .*`+regexpQuote(bad), `^hint: kubectl config view --kubeconfig `+regexpQuote(bad)+`$`) {
			t.Errorf("stderr %q", errOut)
		}
	})
	t.Run("KUBECONFIG names no file that exists", func(t *testing.T) {
		missing := filepath.Join(dir, "missing") + string(os.PathListSeparator) + filepath.Join(dir, "gone")
		t.Setenv("KUBECONFIG", missing)
		root, streams, got := newTestPlugin(t)
		root.SetArgs([]string{"sub"})
		if code := Run(context.Background(), root, streams); code != ExitUsage {
			t.Errorf("exit %d, want 2 as for --kubeconfig naming a missing file", code)
		}
		if want := "error: reading kubeconfig: KUBECONFIG=" + missing + " names no file that exists\nhint: echo $KUBECONFIG; kubectl config view\n"; func() string { _, e := got(); return e }() != want {
			t.Errorf("stderr, want %q", want)
		}
		// A command that never reaches a cluster does not read it.
		root, streams, _ = newTestPlugin(t)
		root.AddCommand(&cobra.Command{Use: "table", Args: cobra.NoArgs, Annotations: map[string]string{OfflineAnnotation: "true"},
			RunE: func(*cobra.Command, []string) error { return nil }})
		root.SetArgs([]string{"table"})
		if code := Run(context.Background(), root, streams); code != ExitOK {
			t.Errorf("an offline command: exit %d, want 0", code)
		}
		// One file of the list that exists is enough, as for client-go.
		t.Setenv("KUBECONFIG", filepath.Join(dir, "missing")+string(os.PathListSeparator)+kc)
		root, streams, _ = newTestPlugin(t)
		root.SetArgs([]string{"sub"})
		if code := Run(context.Background(), root, streams); code == ExitUsage {
			t.Errorf("exit 2 with one KUBECONFIG file present")
		}
	})
	t.Run("version reads no kubeconfig", func(t *testing.T) {
		root, streams, _ := newTestPlugin(t)
		root.SetArgs([]string{"version", "--context", "nope"})
		if code := Run(context.Background(), root, streams); code != ExitOK {
			t.Errorf("exit %d", code)
		}
	})
}

func TestKubeconfigErrOneWording(t *testing.T) {
	for _, in := range []error{
		errors.New(`context "nope" does not exist`),
		errors.New(`invalid configuration: context was not found for specified context: nope`),
	} {
		err := KubeconfigErr(in)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage || err.Error() != `context "nope" is not in the kubeconfig` || ee.Hint != ContextHint {
			t.Errorf("%v -> %#v", in, err)
		}
	}
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

// regexpLines reports whether s has exactly one line per pattern, each
// matching its pattern.
func regexpLines(s string, patterns ...string) bool {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) != len(patterns) {
		return false
	}
	for i, p := range patterns {
		if !regexp.MustCompile(p).MatchString(lines[i]) {
			return false
		}
	}
	return true
}

// TestRequestTimeoutInTheSuitesWords: client-go's own error for a bad
// --request-timeout becomes one line that names the flag.
func TestRequestTimeoutInTheSuitesWords(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\ncontexts: [{name: a, context: {cluster: a}}]\nclusters: [{name: a, cluster: {server: https://127.0.0.1:1}}]\ncurrent-context: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kc},
		&clientcmd.ConfigOverrides{Timeout: "bogus"}).ClientConfig()
	if err == nil {
		t.Fatal("client-go took --request-timeout bogus")
	}
	got := KubeconfigErr(err)
	if ExitCode(got) != ExitUsage || got.Error() != "--request-timeout: want a duration such as 30s or 2m, a whole number of seconds, or 0 for none" {
		t.Errorf("%v -> %v", err, got)
	}
}
