//go:build e2e

package secretse2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// silentServer accepts TCP connections and never writes a byte: the TLS
// handshake, and so every request, waits forever.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = c.Read(make([]byte, 1<<16)) }() // read, never answer
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestServerThatNeverAnswers: every plugin, pointed at a server that
// accepts the connection and never answers, exits 3 within
// --request-timeout plus a small margin, with one error line.
func TestServerThatNeverAnswers(t *testing.T) {
	addr := silentServer(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: silent
  cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: not-a-real-token}
contexts:
- name: silent
  context: {cluster: silent, user: u, namespace: default}
current-context: silent
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const timeout = 3 * time.Second
	// Nine binaries start at once on a two-core CI machine that may be
	// busy: the margin is wide, but far below what a retried request
	// (client-go tries ten times) or a hang would take.
	const margin = 5 * time.Second
	flows := []struct {
		bin  string
		args []string
	}{
		{"kubectl-deprecations", nil},
		{"kubectl-skew", nil},
		{"kubectl-skew", []string{"plan", "--target", "v1.37"}},
		{"kubectl-pdb_blockers", []string{"-l", "pool=a"}},
		{"kubectl-gang_drain", []string{"plan", "-l", "pool=a"}},
		{"kubectl-gang_drain", []string{"status"}},
		{"kubectl-crd_migrate", []string{"status"}},
		{"kubectl-crd_migrate", []string{"run", "--all", "--dry-run"}},
		{"kubectl-gpu_validate", []string{"nodes", "-l", "pool=a"}},
	}
	var wg sync.WaitGroup
	for _, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append(append([]string{}, f.args...), "--kubeconfig", kc, "--request-timeout", timeout.String())
			res := plugintest.RunCmd(t, plugintest.Binary(t, f.bin), plugintest.Cmd{Args: args, Timeout: time.Minute})
			name := f.bin + " " + strings.Join(f.args, " ")
			t.Logf("%s: exit %d after %s", name, res.ExitCode, res.Duration.Round(10*time.Millisecond))
			if res.ExitCode != 3 {
				t.Errorf("%s: want exit 3\n%s", name, res)
			}
			if res.Duration > timeout+margin {
				t.Errorf("%s: took %s, --request-timeout is %s", name, res.Duration.Round(10*time.Millisecond), timeout)
			}
			var errs int
			for _, l := range strings.Split(strings.TrimSpace(res.Stderr), "\n") {
				switch {
				case strings.HasPrefix(l, "error: "):
					errs++
				case strings.HasPrefix(l, "hint: "):
				default:
					t.Errorf("%s: stderr line that is neither the error nor its hint: %q", name, l)
				}
			}
			if errs != 1 {
				t.Errorf("%s: want one error line, got %d\n%s", name, errs, res.Stderr)
			}
		}()
	}
	wg.Wait()
}
