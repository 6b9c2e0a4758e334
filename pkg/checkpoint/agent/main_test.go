package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
			code := Main(context.Background(), append(append([]string{}, base...), tc.args...), &stderr)
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if code != tc.code || len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") || !strings.Contains(lines[0], tc.line) {
				t.Errorf("exit %d, stderr %q; want %d and one error line with %q", code, stderr.String(), tc.code, tc.line)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		var stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		code := Main(ctx, append(append([]string{}, base...), "--namespace", "ml", "--root", "JobSet/x"), &stderr)
		var errs []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.HasPrefix(l, "error: ") {
				errs = append(errs, l)
			}
		}
		if code != ExitUnavailable || len(errs) != 1 || !strings.Contains(errs[0], "127.0.0.1:1") {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
	})
}
