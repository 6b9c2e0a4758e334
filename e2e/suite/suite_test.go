//go:build e2e

// Package suite checks what every plugin shares, as users meet it: plugin
// discovery through kubectl, help, version, usage errors, an unreachable
// server, a live cluster, and installation with krew.
package suite

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{})
}

// commands maps each binary to its kubectl command.
var commands = map[string]string{
	"kubectl-skew":         "skew",
	"kubectl-deprecations": "deprecations",
	"kubectl-gang_drain":   "gang-drain",
	"kubectl-gpu_validate": "gpu-validate",
	"kubectl-pdb_blockers": "pdb-blockers",
	"kubectl-crd_migrate":  "crd-migrate",
}

// kubectl runs the real kubectl with the plugins first on PATH.
func kubectl(t *testing.T, args ...string) plugintest.Result {
	t.Helper()
	cp := harness.Shared(t)
	return plugintest.RunCmd(t, cp.Binaries.Kubectl, plugintest.Cmd{
		Args: args,
		Env:  []string{"PATH=" + plugintest.BinDir(t) + string(os.PathListSeparator) + os.Getenv("PATH")},
	})
}

func TestSuiteKubectlDispatchHelpAndVersion(t *testing.T) {
	for bin, name := range commands {
		t.Run(name, func(t *testing.T) {
			r := kubectl(t, name, "--help")
			if r.ExitCode != 0 {
				t.Fatalf("kubectl %s --help: %s", name, r)
			}
			for _, want := range []string{"Examples:", "kubectl " + name, "Exit codes:", "130  interrupted", "--context", "--kubeconfig"} {
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("kubectl %s --help lacks %q", name, want)
				}
			}
			r = kubectl(t, name, "version", "-o", "json")
			var v struct{ Version, GoVersion string }
			if r.ExitCode != 0 || json.Unmarshal([]byte(r.Stdout), &v) != nil || v.Version == "" || v.GoVersion == "" {
				t.Errorf("kubectl %s version -o json: %s", name, r)
			}
			r = plugintest.Run(t, bin, "--no-such-flag")
			if r.ExitCode != 2 {
				t.Errorf("%s --no-such-flag: exit %d, want 2\n%s", bin, r.ExitCode, r)
			}
			if !strings.HasPrefix(r.Stderr, "error: unknown flag: --no-such-flag\n") || strings.Contains(r.Stderr, "goroutine") {
				t.Errorf("%s bad flag stderr: %q", bin, r.Stderr)
			}
			if r.Stdout != "" {
				t.Errorf("%s printed on stdout for a usage error: %q", bin, r.Stdout)
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestSuiteUnreachableServer(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster:
    server: https://` + closedPort(t) + `
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: x
contexts:
- name: dead
  context: {cluster: dead, user: u}
current-context: dead
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The subcommand each plugin runs by default against a cluster.
	args := map[string][]string{
		"kubectl-skew":         nil,
		"kubectl-deprecations": nil,
		"kubectl-gang_drain":   {"status"},
		"kubectl-gpu_validate": {"nodes", "-l", "gpufleet.dev/e2e=none"},
		"kubectl-pdb_blockers": {"--all-nodes"},
		"kubectl-crd_migrate":  {"status"},
	}
	for bin := range commands {
		t.Run(bin, func(t *testing.T) {
			a := append(append([]string{}, args[bin]...), "--kubeconfig", kc)
			r := plugintest.Run(t, bin, a...)
			if r.ExitCode != 3 {
				t.Errorf("exit %d, want 3\n%s", r.ExitCode, r)
			}
			lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
			if len(lines) == 0 || !strings.HasPrefix(lines[0], "error: ") || len(lines) > 2 {
				t.Errorf("want one error line (and at most a hint), got:\n%s", r.Stderr)
			}
			if strings.Contains(r.Stderr, "goroutine") || strings.Contains(r.Stderr, "panic") {
				t.Errorf("stack trace on stderr:\n%s", r.Stderr)
			}
			r = plugintest.Run(t, bin, append(append([]string{}, args[bin]...), "--kubeconfig", kc, "--context", "nope")...)
			if r.ExitCode != 2 {
				t.Errorf("unknown --context: exit %d, want 2\n%s", r.ExitCode, r)
			}
		})
	}
}

func TestSuiteKrewInstall(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("release archives are built for linux here")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	krew := filepath.Join(harness.CacheDir(), "krew-"+harness.KrewVersion, "krew")
	if _, err := os.Stat(krew); err != nil {
		out, err := exec.Command(filepath.Join(root, "e2e/tools/build.sh"), "krew").CombinedOutput()
		if err != nil {
			t.Fatalf("building krew: %v\n%s", err, out)
		}
	}
	plat := runtime.GOOS + "/" + runtime.GOARCH
	work := t.TempDir()
	build := filepath.Join(work, "build", runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(build, 0o755); err != nil {
		t.Fatal(err)
	}
	for bin := range commands {
		data, err := os.ReadFile(plugintest.Binary(t, bin))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(build, bin), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dist := filepath.Join(work, "dist")
	const version = "v0.0.1-e2e"
	for _, args := range [][]string{
		{"dist", "-version", version, "-build", filepath.Join(work, "build"), "-out", dist, "-platforms", plat},
		{"krew", "-version", version, "-dist", dist, "-out", filepath.Join(dist, "krew"), "-platforms", plat},
	} {
		cmd := exec.Command("go", append([]string{"run", "./hack/release"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/release %s: %v\n%s", args[0], err, out)
		}
	}
	krewRoot := filepath.Join(work, "krew-root")
	env := []string{"KREW_ROOT=" + krewRoot, "KREW_NO_UPGRADE_CHECK=1"}
	archive := filepath.Join(dist, "kubectl-gang_drain_"+version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	r := plugintest.RunCmd(t, krew, plugintest.Cmd{
		Args: []string{"install", "--manifest=" + filepath.Join(dist, "krew", "gang-drain.yaml"), "--archive=" + archive},
		Env:  env,
	})
	if r.ExitCode != 0 {
		t.Fatalf("krew install: %s", r)
	}
	// Only krew's bin/ (not the freshly built plugins) is on PATH now.
	cp := harness.Shared(t)
	r = plugintest.RunCmd(t, cp.Binaries.Kubectl, plugintest.Cmd{
		Args: []string{"gang-drain", "version"},
		Env:  append(env, "PATH="+filepath.Join(krewRoot, "bin")+string(os.PathListSeparator)+"/usr/bin:/bin"),
	})
	if r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "gang-drain v") {
		t.Fatalf("kubectl gang-drain version after krew install: %s", r)
	}
	r = plugintest.RunCmd(t, cp.Binaries.Kubectl, plugintest.Cmd{
		Args: []string{"plugin", "list"},
		Env:  append(env, "PATH="+filepath.Join(krewRoot, "bin")+string(os.PathListSeparator)+"/usr/bin:/bin"),
	})
	if !strings.Contains(r.Stdout, "kubectl-gang_drain") {
		t.Errorf("kubectl plugin list does not show the krew-installed plugin:\n%s", r)
	}
	for _, f := range []string{"kubectl_complete-gang_drain", "LICENSE"} {
		matches, _ := filepath.Glob(filepath.Join(krewRoot, "store", "gang-drain", version, f))
		if len(matches) != 1 {
			t.Errorf("krew did not install %s", f)
		}
	}
}

func TestSuiteAgainstLiveCluster(t *testing.T) {
	cp := harness.Shared(t)
	// Every plugin's default read-only command answers against a real apiserver with a versioned report.
	r := kubectl(t, "skew", "--kubeconfig", cp.Kubeconfig, "-o", "json")
	if r.ExitCode == 2 || r.ExitCode == 3 {
		t.Fatalf("kubectl skew on the live cluster: %s", r)
	}
	var rep struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			ServerVersion string `json:"serverVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("skew -o json is not JSON: %v\n%s", err, r)
	}
	if rep.APIVersion != "gpufleet.dev/v1alpha2" || !strings.HasSuffix(rep.Kind, "Report") || rep.Metadata.ServerVersion != harness.KubeVersion {
		t.Errorf("report header %+v", rep)
	}
}
