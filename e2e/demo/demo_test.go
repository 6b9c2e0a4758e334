//go:build e2e

package demoe2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster/scenario"
)

// runbookJSON is the part of runbook.json the test reads.
type runbookJSON struct {
	OK    bool `json:"ok"`
	Steps []struct {
		Title    string   `json:"title"`
		Commands []string `json:"commands"`
		ExitCode int      `json:"exitCode"`
		Expected int      `json:"expected"`
		Evidence string   `json:"evidence"`
		Error    string   `json:"error"`
		Skipped  string   `json:"skipped"`
	} `json:"steps"`
	GPUSecondsLost           float64 `json:"gpuSecondsLost"`
	PlainDrainLossGPUSeconds float64 `json:"plainDrainLossGPUSeconds"`
	Checkpointed             bool    `json:"checkpointed"`
}

// democluster returns the demo binary: bin/democluster from `make build`
// when PLUGIN_BIN_DIR points there, built here otherwise.
func democluster(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(plugintest.BinDir(t), "democluster"); fileExists(p) {
		return p
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "democluster")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/democluster")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/democluster: %v\n%s", err, b)
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestDemoRunbook creates the demo scenario, runs the whole runbook as
// `make demo` does, and checks every step's exit code and the end state:
// the pool upgraded and schedulable, the gang readmitted by Kueue after a
// checkpoint, storedVersions trimmed.
func TestDemoRunbook(t *testing.T) {
	cp := harness.Shared(t)
	bin := plugintest.BinDir(t)
	demo := democluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	scn, err := scenario.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	summary, err := scn.Create(ctx, cp.Cluster, true)
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	t.Logf("scenario in %s:\n%s", time.Since(began).Round(time.Millisecond), summary)

	evidence := t.TempDir()
	cmd := exec.CommandContext(ctx, demo, "runbook", "--dir", t.TempDir(), "--kubeconfig", cp.Kubeconfig,
		"--bin", bin, "--kubectl", cp.Binaries.Kubectl, "--evidence", evidence)
	began = time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("democluster runbook (%s, err %v):\n%s", time.Since(began).Round(time.Millisecond), err, out)
	if err != nil {
		t.Fatalf("runbook failed: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(evidence, "runbook.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rb runbookJSON
	if err := json.Unmarshal(b, &rb); err != nil {
		t.Fatal(err)
	}

	// Every step ran, with the exit code the runbook expects, and each
	// exit code is the one a person would see.
	want := []struct {
		command string
		exit    int
	}{
		{"kubectl skew plan --target " + scn.Upgrade.Target + " --runbook", 0},
		{"kubectl skew preflight --target " + scn.Upgrade.Target + " --save ", 1},
		{"kubectl deprecations", 1},
		{"kubectl pdb-blockers -l " + scn.PoolSelector(), 1},
		{"kubectl pdb-blockers -l " + scn.PoolSelector() + " --fail-on blocking", 0},
		{"kubectl gang-drain plan -l " + scn.PoolSelector(), 0},
		{"kubectl gang-drain run -l " + scn.PoolSelector(), 0},
		{"kubectl get jobsets,workloads", 0},
		{"kubectl patch", 0},
		{"kubectl gpu-validate nodes -l " + scn.PoolSelector(), 0},
		{"kubectl gang-drain restore ", 0},
		{"kubectl skew verify --baseline ", 0},
		{"kubectl crd-migrate run ", 0},
	}
	if !rb.OK || len(rb.Steps) != len(want) {
		t.Fatalf("runbook ok=%v with %d steps, want %d:\n%s", rb.OK, len(rb.Steps), len(want), b)
	}
	for i, w := range want {
		s := rb.Steps[i]
		cmds := strings.Join(s.Commands, "\n")
		if s.Skipped != "" || s.Error != "" || s.ExitCode != w.exit || s.Expected != w.exit || !strings.Contains(cmds, w.command) {
			t.Errorf("step %d %q: exit %d (expected %d, want %d), skipped %q, error %q, commands:\n%s\nwant one containing %q",
				i+1, s.Title, s.ExitCode, s.Expected, w.exit, s.Skipped, s.Error, cmds, w.command)
		}
	}
	// The printed fix was applied between the two pdb-blockers runs.
	if !strings.Contains(strings.Join(rb.Steps[3].Commands, "\n"), "kubectl scale deployment/llm-serve -n inference --replicas=3") {
		t.Errorf("the fix applied: %v", rb.Steps[3].Commands)
	}
	for _, s := range rb.Steps {
		if s.Evidence != "" && !fileExists(s.Evidence) {
			t.Errorf("step %q: evidence %s missing", s.Title, s.Evidence)
		}
	}
	text := string(out)
	for _, sub := range []string{
		"export KUBECONFIG=",
		"gpufleet-checkpoint-agent --namespace " + scn.Gang.Namespace + " --root JobSet/" + scn.Gang.JobSet,
		"[trainer llama-pretrain] request.json: checkpoint requested",
		"[trainer llama-pretrain] step 12000 saved",
		"[agent]",
		"answering ready-to-stop",
		"0 regressions against the baseline",
		"SIMULATED",
		"GPU-seconds of training lost: 0",
		"A plain kubectl drain would have lost about",
	} {
		if !strings.Contains(text, sub) {
			t.Errorf("output lacks %q", sub)
		}
	}
	if !rb.Checkpointed || rb.GPUSecondsLost != 0 || rb.PlainDrainLossGPUSeconds <= 0 {
		t.Errorf("checkpointed %v, lost %v GPU-s, plain drain estimate %v GPU-s", rb.Checkpointed, rb.GPUSecondsLost, rb.PlainDrainLossGPUSeconds)
	}

	// The end state, read from the cluster.
	for _, name := range scn.Pool().NodeNames() {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.NodeInfo.KubeletVersion != scn.Upgrade.KubeletVersion || n.Spec.Unschedulable {
			t.Errorf("node %s: kubelet %s, unschedulable %v", name, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
		}
	}
	js, err := cp.JobSetClient().JobsetV1alpha2().JobSets(scn.Gang.Namespace).Get(ctx, scn.Gang.JobSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wl, err := cp.WorkloadFor(ctx, scn.Gang.Namespace, string(js.UID))
	if err != nil {
		t.Fatal(err)
	}
	if !harness.WorkloadAdmitted(wl) || wl.Spec.Active == nil || !*wl.Spec.Active {
		t.Errorf("workload %s: admitted %v active %v", wl.Name, harness.WorkloadAdmitted(wl), wl.Spec.Active)
	}
	if err := cp.WaitPodsReady(ctx, scn.Gang.Namespace, "jobset.sigs.k8s.io/jobset-name="+scn.Gang.JobSet, 4, time.Minute); err != nil {
		t.Error(err)
	}
	for _, mv := range scn.StorageVersionMoves {
		crd, err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, mv.CRD, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != mv.To {
			t.Errorf("CRD %s storedVersions %v, want [%s]", mv.CRD, got, mv.To)
		}
	}
}
