//go:build e2e

package runbooke2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{})
}

// kubeadmCheck returns the kubeadmcheck binary, building it with
// e2e/tools/build.sh when it is missing.
func kubeadmCheck(t *testing.T) string {
	t.Helper()
	path := filepath.Join(harness.CacheDir(), "kubernetes-"+harness.KubeVersion, "kubeadmcheck")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if os.Getenv("E2E_NO_BUILD") != "" {
		t.Fatalf("%s is missing and E2E_NO_BUILD is set: run e2e/tools/build.sh kubeadmcheck", path)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "e2e", "tools", "build.sh"), "kubeadmcheck")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building kubeadmcheck: %v", err)
	}
	return path
}

// capiCRDs returns Cluster API's Cluster, MachineDeployment, Machine and
// KubeadmControlPlane CRDs from the module (e2e/tools/build.sh capi).
func capiCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "e2e", "tools", "build.sh"), "capi").Output()
	if err != nil {
		t.Fatalf("e2e/tools/build.sh capi: %v", err)
	}
	base := filepath.Join(strings.TrimSpace(string(out)), "capi-v1.14.0")
	want := map[string]bool{"clusters.cluster.x-k8s.io": true, "machinedeployments.cluster.x-k8s.io": true,
		"machines.cluster.x-k8s.io": true, "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io": true}
	var got []*apiextensionsv1.CustomResourceDefinition
	for _, d := range []string{"crds", "controlplane-crds"} {
		crds, err := harness.LoadCRDs(filepath.Join(base, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range crds {
			if want[c.Name] {
				got = append(got, c)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d of Cluster API's %d CRDs in %s", len(got), len(want), base)
	}
	return got
}

// scenarios are the provider/variant pairs to run: all, or those
// RUNBOOK_SCENARIOS names (comma-separated, "eks" for all of a provider).
func scenarios() []Scenario {
	var out []Scenario
	want := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("RUNBOOK_SCENARIOS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	for _, p := range Providers {
		for _, v := range Variants {
			sc := Scenario{Provider: p, Variant: v}
			if len(want) == 0 || want[p] || want[sc.Name()] {
				out = append(out, sc)
			}
		}
	}
	return out
}

// needAz says whether an AKS scenario runs: az is needed for those only
// (RUNBOOK_SCENARIOS may leave them out, and with them the azure-cli
// install).
func needAz() bool {
	for _, sc := range scenarios() {
		if sc.Provider == "aks" {
			return true
		}
	}
	return false
}

// cpuTime is the CPU time of the test's children that have exited (the
// pasted shells and the clients they ran; the control plane's components
// run until the test ends).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfCPU is the test process's own CPU time: the recording endpoints,
// the proxy, the mirror and the host checks.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRunbookPasted renders kubectl skew plan --runbook for every
// provider on every inventory variant and runs each block as a reader
// pastes it, against the local control plane and the recording
// endpoints; see doc.go.
func TestRunbookPasted(t *testing.T) {
	cp := harness.Shared(t)
	check := kubeadmCheck(t)
	dir := t.TempDir()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, sc := range scenarios() {
		if sc.Provider == "capi" {
			crds = capiCRDs(t)
			break
		}
	}
	lane, err := StartLane(dir, cp.Config, cp.Client, LaneOptions{
		KubectlDir: filepath.Dir(cp.Binaries.Kubectl), PluginDir: plugintest.BinDir(t), KubeadmCheck: check,
		Kwok: cp.Binaries.Kwok, KwokStages: cp.Binaries.KwokStages, ClusterKubeconfig: cp.Kubeconfig,
		CAPICRDs: crds, ApplyCRDs: cp.ApplyCRDs,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lane.Close()
	if lane.AzNote != "" {
		t.Log(lane.AzNote)
	}
	if clis, err := ReadCLIs(context.Background(), needAz()); err != nil {
		t.Error(err)
	} else {
		t.Logf("pasting into %s", strings.Join(clis.Names(), ", "))
	}
	start, cpu0, self0 := time.Now(), cpuTime(), selfCPU()
	var all []*BlockResult
	for _, sc := range scenarios() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		s0, c0, p0 := time.Now(), cpuTime(), selfCPU()
		rs, err := lane.Run(ctx, sc)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", sc.Name(), err)
			continue
		}
		bad, unreached, skipped, stop := 0, 0, 0, ""
		for _, r := range rs {
			switch {
			case r.NotReached:
				unreached++
			case r.Skipped != "":
				skipped++
			case !r.OK():
				bad++
			}
			if r.Stopped != "" {
				stop = fmt.Sprintf(", stopped at %s (%s)", r.Key(), r.Stopped)
			}
		}
		t.Logf("%s: %d pastes, %d failing, %d not reached%s, %d skipped, %.1fs wall, %.1fs CPU of children, %.1fs CPU of the test process", sc.Name(), len(rs)-unreached-skipped, bad, unreached, stop, skipped, time.Since(s0).Seconds(), (cpuTime() - c0).Seconds(), (selfCPU() - p0).Seconds())
		all = append(all, rs...)
		if out := os.Getenv("RUNBOOK_REPORT"); out != "" {
			writeReport(t, out, all) // readable while later scenarios run
		}
	}
	t.Logf("lane: %d pastes in %.1fs wall, %.1fs CPU of children, %.1fs CPU of the test process", len(all), time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds(), (selfCPU() - self0).Seconds())
	if out := os.Getenv("RUNBOOK_REPORT"); out != "" {
		writeReport(t, out, all)
	}
	for _, r := range all {
		if !r.OK() {
			t.Errorf("a pasted block fails:\n%s", r.Report())
		}
	}
}

// writeReport writes every paste's result as JSON and the failing ones
// as text, for reading after a run.
func writeReport(t *testing.T, path string, rs []*BlockResult) {
	b, _ := json.MarshalIndent(rs, "", "  ")
	if err := os.WriteFile(path+".json", b, 0o644); err != nil {
		t.Error(err)
	}
	var txt strings.Builder
	var keys []string
	for _, r := range rs {
		if !r.OK() {
			keys = append(keys, r.Key())
			txt.WriteString(r.Report() + "\n")
		}
	}
	var stops []string
	unreached := 0
	for _, r := range rs {
		if r.Stopped != "" {
			stops = append(stops, r.Key()+": "+r.Stopped)
		}
		if r.NotReached {
			unreached++
		}
	}
	sort.Strings(keys)
	fmt.Fprintf(&txt, "\n%d of %d pastes fail:\n%s\n", len(keys), len(rs)-unreached, strings.Join(keys, "\n"))
	if len(stops) > 0 {
		fmt.Fprintf(&txt, "\n%d blocks not reached after a block that stops the reader:\n%s\n", unreached, strings.Join(stops, "\n"))
	}
	if err := os.WriteFile(path+".txt", []byte(txt.String()), 0o644); err != nil {
		t.Error(err)
	}
}
