package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestMainExitCodes(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	// A cluster nobody listens on.
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--kubeconfig", kc, "--dir", dir, "--labels-file", ""}
	for _, tc := range []struct {
		name string
		args []string
		code int
		line string
	}{
		{"signal without process", []string{"--namespace", "ml", "--root", "JobSet/x", "--signal", "SIGUSR1"}, ExitUsage, "--signal needs --process"},
		{"bad signal", []string{"--namespace", "ml", "--signal", "SIGNOPE", "--process", "python"}, ExitUsage, "unknown signal"},
		{"no namespace", []string{"--root", "JobSet/x"}, ExitUsage, "no namespace"},
		{"unknown root kind", []string{"--namespace", "ml", "--root", "Deployment/x"}, ExitUsage, "unknown root kind"},
		{"bad root", []string{"--namespace", "ml", "--root", "x"}, ExitUsage, "want KIND/NAME"},
		{"nothing names the root", []string{"--namespace", "ml", "--pod-name", ""}, ExitUsage, "cannot find the gang's root object"},
		{"missing dir", []string{"--namespace", "ml", "--root", "JobSet/x", "--dir", filepath.Join(dir, "nope")}, ExitUsage, "is not a directory"},
		{"arguments", []string{"--namespace", "ml", "extra"}, ExitUsage, "takes flags only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			t.Setenv("POD_NAMESPACE", "")
			t.Setenv("POD_NAME", "")
			code, err := runAgent(context.Background(), append(append([]string{}, base...), tc.args...), &stderr)
			if code != tc.code || err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tc.line) || stderr.Len() != 0 {
				t.Errorf("exit %d, error %v, stderr %q; want %d and one error line with %q", code, err, stderr.String(), tc.code, tc.line)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		var stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		code, err := runAgent(ctx, append(append([]string{}, base...), "--namespace", "ml", "--root", "JobSet/x"), &stderr)
		if code != ExitUnavailable || err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("exit %d, error %v, stderr %q", code, err, stderr.String())
		}
	})
}

// runAgent parses args as the command does and runs the agent, returning
// the exit code its error maps to.
func runAgent(ctx context.Context, args []string, stderr *bytes.Buffer) (int, error) {
	o := NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return ExitUsage, err
	}
	o.Args = fs.Args()
	err := o.Run(ctx, stderr)
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code, err
	}
	return 0, err
}
