package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Versions of the binaries the harness runs. They must match
// e2e/tools/build.sh and the tools modules under e2e/tools.
const (
	KubeVersion   = "v1.37.2"
	EtcdVersion   = "v3.6.16"
	KwokVersion   = "v0.8.0"
	KueueVersion  = "v0.17.0"
	JobSetVersion = "v0.11.1"
	KrewVersion   = "v0.4.3"
	HelmVersion   = "v4.3.2"
)

// Binaries holds the paths of the control-plane binaries and data files.
type Binaries struct {
	Dir                   string // the version-keyed cache
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubectl               string
	Kwok                  string
	KwokStages            string // KWOK's Stage YAML tree (kustomize/stage)
	Kueue                 string
	KueueCRDs             string
	JobSet                string
	JobSetCRDs            string
	Krew                  string
	Helm                  string // built on demand: e2e/tools/build.sh helm
}

// CacheDir returns the binary cache: $E2E_BIN_DIR, else
// $XDG_CACHE_HOME/gpufleet-e2e, else ~/.cache/gpufleet-e2e, as build.sh does.
func CacheDir() string {
	if d := os.Getenv("E2E_BIN_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "gpufleet-e2e")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "gpufleet-e2e")
	}
	return filepath.Join(home, ".cache", "gpufleet-e2e")
}

// BinariesIn returns the binary paths under cache dir.
func BinariesIn(dir string) Binaries {
	kd := filepath.Join(dir, "kubernetes-"+KubeVersion)
	kw := filepath.Join(dir, "kwok-"+KwokVersion)
	ku := filepath.Join(dir, "kueue-"+KueueVersion)
	js := filepath.Join(dir, "jobset-"+JobSetVersion)
	return Binaries{
		Dir:                   dir,
		Etcd:                  filepath.Join(dir, "etcd-"+EtcdVersion, "etcd"),
		KubeAPIServer:         filepath.Join(kd, "kube-apiserver"),
		KubeControllerManager: filepath.Join(kd, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(kd, "kube-scheduler"),
		Kubectl:               filepath.Join(kd, "kubectl"),
		Kwok:                  filepath.Join(kw, "kwok"),
		KwokStages:            filepath.Join(kw, "stage"),
		Kueue:                 filepath.Join(ku, "kueue"),
		KueueCRDs:             filepath.Join(ku, "crds"),
		JobSet:                filepath.Join(js, "jobset"),
		JobSetCRDs:            filepath.Join(js, "crds"),
		Krew:                  filepath.Join(dir, "krew-"+KrewVersion, "krew"),
		Helm:                  filepath.Join(dir, "helm-"+HelmVersion, "helm"),
	}
}

// missing lists the components (build.sh arguments) whose files are absent.
func (b Binaries) missing(opts Options) []string {
	var out []string
	if !allExist(b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.Kubectl, b.Kwok, b.KwokStages) {
		out = append(out, "core")
	}
	if opts.Kueue && !allExist(b.Kueue, b.KueueCRDs) {
		out = append(out, "kueue")
	}
	if opts.JobSet && !allExist(b.JobSet, b.JobSetCRDs) {
		out = append(out, "jobset")
	}
	return out
}

func allExist(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// RepoRoot finds the repository root: $GPUFLEET_REPO_ROOT, the directory of
// this source file, or the main module of the working directory.
func RepoRoot() (string, error) {
	if d := os.Getenv("GPUFLEET_REPO_ROOT"); d != "" {
		return d, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if _, err := os.Stat(filepath.Join(root, "e2e", "tools", "build.sh")); err == nil {
			return root, nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		mod := strings.TrimSpace(string(out))
		if mod != "" && mod != os.DevNull {
			root := filepath.Dir(mod)
			if _, err := os.Stat(filepath.Join(root, "e2e", "tools", "build.sh")); err == nil {
				return root, nil
			}
		}
	}
	return "", errors.New("cannot find the repository root (e2e/tools/build.sh); set GPUFLEET_REPO_ROOT")
}

var buildMu sync.Mutex

// EnsureBinaries returns the binaries opts needs, building missing ones with
// e2e/tools/build.sh (which takes many minutes on a cold cache). With
// E2E_NO_BUILD=1 a missing binary is an error instead.
func EnsureBinaries(opts Options) (Binaries, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	b := BinariesIn(CacheDir())
	need := b.missing(opts)
	if len(need) == 0 {
		return b, nil
	}
	if os.Getenv("E2E_NO_BUILD") != "" {
		return b, fmt.Errorf("control-plane binaries missing in %s (%s); run e2e/tools/build.sh %s", b.Dir, strings.Join(need, ", "), strings.Join(need, " "))
	}
	root, err := RepoRoot()
	if err != nil {
		return b, fmt.Errorf("control-plane binaries missing in %s and %w", b.Dir, err)
	}
	script := filepath.Join(root, "e2e", "tools", "build.sh")
	logf(opts, "building %s into %s with %s (a cold build takes 20-40 minutes)", strings.Join(need, ", "), b.Dir, script)
	cmd := exec.Command(script, need...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = opts.logWriter()
	cmd.Env = append(os.Environ(), "E2E_BIN_DIR="+b.Dir)
	if err := cmd.Run(); err != nil {
		return b, fmt.Errorf("%s %s: %w", script, strings.Join(need, " "), err)
	}
	if left := b.missing(opts); len(left) > 0 {
		return b, fmt.Errorf("%s ran but %s still missing in %s", script, strings.Join(left, ", "), b.Dir)
	}
	return b, nil
}
