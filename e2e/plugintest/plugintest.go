// Package plugintest builds the plugin binaries once per test process and
// runs them the way users do: as processes, optionally through kubectl's
// plugin dispatch, with their stdout, stderr and exit code captured. It never
// prints and never touches a cluster itself.
package plugintest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binaries are the six plugin binaries.
var Binaries = []string{
	"kubectl-skew", "kubectl-deprecations", "kubectl-gang_drain",
	"kubectl-gpu_validate", "kubectl-pdb_blockers", "kubectl-crd_migrate",
}

// Tools are the other binaries the e2e tests run (built with the plugins;
// `make build` puts them in bin/ too).
var Tools = []string{"gpufleet-checkpoint-agent"}

// BinDir builds every plugin into one temporary directory (once per test
// process) and returns it. Set PLUGIN_BIN_DIR to use prebuilt binaries
// (for example `make build`'s bin/).
func BinDir(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if d := os.Getenv("PLUGIN_BIN_DIR"); d != "" {
			binDir, buildErr = filepath.Abs(d)
			return
		}
		pkgs := make([]string, 0, len(Binaries)+len(Tools))
		for _, b := range append(Binaries[:len(Binaries):len(Binaries)], Tools...) {
			pkgs = append(pkgs, "./cmd/"+b)
		}
		binDir, buildErr = build("gpufleet-plugins-", pkgs...)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// build compiles the packages of the repository into a new temporary
// directory (named from prefix) and returns it.
func build(prefix string, pkgs ...string) (string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return dir, nil
}

// Binary returns the path of one built plugin, such as "kubectl-skew".
func Binary(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(BinDir(t), name)
}

// Result is what a finished command left behind.
type Result struct {
	Stdout   string
	Stderr   string
	ExitCode int
	Duration time.Duration
}

// String summarises the result for test failure messages.
func (r Result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.ExitCode, r.Stdout, r.Stderr)
}

// Cmd describes one invocation.
type Cmd struct {
	// Args after the binary name.
	Args []string
	// Env entries added to a minimal environment (PATH, HOME, NO_COLOR unset).
	Env []string
	// Stdin, if set, is fed to the command.
	Stdin string
	// Timeout kills the command after this long (default 2 minutes).
	Timeout time.Duration
}

// Run runs the plugin binary name with args and returns its result. It
// fails the test only when the process could not be started or timed out.
func Run(t testing.TB, name string, args ...string) Result {
	t.Helper()
	return RunCmd(t, Binary(t, name), Cmd{Args: args})
}

// RunCmd runs any executable with the given invocation.
func RunCmd(t testing.TB, path string, c Cmd) Result {
	t.Helper()
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, c.Args...)
	cmd.Env = append(baseEnv(), c.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Duration: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %s\n%s", filepath.Base(path), strings.Join(c.Args, " "), timeout, r)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.ExitCode = ee.ExitCode()
	default:
		t.Fatalf("running %s: %v", path, err)
	}
	return r
}

// baseEnv is a small, predictable environment: no colour decisions leak in
// from the developer's shell, and HOME points somewhere harmless.
func baseEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "TERM=dumb"}
	if h := os.Getenv("HOME"); h != "" {
		env = append(env, "HOME="+h)
	}
	return env
}

var (
	peakOnce sync.Once
	peakPath string
	peakErr  error
)

// PeakRSS returns the path of hack/peakrss, built once per test process.
// Benchmarks start a plugin through it (PeakRSS(t), plugin, args...) to
// read the plugin's own peak RSS: a child started straight from the test
// binary shares the test binary's memory until exec, and Linux counts that
// memory into the child's ru_maxrss. SplitPeakRSS reads the figure.
func PeakRSS(t testing.TB) string {
	t.Helper()
	peakOnce.Do(func() {
		dir, err := build("gpufleet-peakrss-", "./hack/peakrss")
		peakPath, peakErr = filepath.Join(dir, "peakrss"), err
	})
	if peakErr != nil {
		t.Fatal(peakErr)
	}
	return peakPath
}

// SplitPeakRSS takes the "peakrss: N" line that hack/peakrss writes last
// off stderr and returns the rest and N (KiB); ok is false without it.
func SplitPeakRSS(stderr string) (rest string, kib int64, ok bool) {
	trimmed := strings.TrimRight(stderr, "\n")
	i := strings.LastIndexByte(trimmed, '\n')
	last := trimmed[i+1:]
	if _, err := fmt.Sscanf(last, "peakrss: %d", &kib); err != nil {
		return stderr, 0, false
	}
	return trimmed[:i+1], kib, true
}

var (
	toolMu    sync.Mutex
	toolPaths = map[string]string{}
)

// Tool returns the path of a command of this repository, such as
// "./hack/watchlist", built once per test process.
func Tool(t testing.TB, pkg string) string {
	t.Helper()
	toolMu.Lock()
	defer toolMu.Unlock()
	if p, ok := toolPaths[pkg]; ok {
		return p
	}
	dir, err := build("gpufleet-tool-", pkg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(pkg))
	toolPaths[pkg] = p
	return p
}
