//go:build e2e

package demoe2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
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

// TestDemoTwice runs `make demo` twice in a row, as README invites: the
// second run restarts the cluster on whatever ports it gets and must show
// the same runbook, gang included; then `demo down` must leave no process
// and no port behind.
func TestDemoTwice(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := plugintest.BinDir(t)
	scn, err := scenario.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	demo := func(args ...string) (string, error) {
		return runDemo(t, ctx, root, dir, bin, args...)
	}
	// Whatever happens, the demo cluster goes (with a context of its own:
	// the test's has ended by then).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, _ = runDemo(t, ctx, root, dir, bin, "down")
	})

	var runs [2]runbookJSON
	for i := range runs {
		out, err := demo()
		if err != nil {
			t.Fatalf("make demo #%d: %v", i+1, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "evidence", "runbook.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &runs[i]); err != nil {
			t.Fatal(err)
		}
		checkRunbook(t, i+1, scn, runs[i], b, out)
		if i == 0 {
			// README's abridged transcript is lines of a real run: the
			// test fails when the output moves away from it.
			lines, err := readmeTranscript(root)
			if err != nil {
				t.Fatal(err)
			}
			if msg := transcriptMismatch(lines, out, dir); msg != "" {
				t.Errorf("%s; update README's transcript from this run's output (logged above)", msg)
			}
		}
		if i == 1 && !strings.Contains(out, "Restarting the demo cluster") {
			t.Errorf("run 2 did not restart the cluster")
		}
		checkEndState(t, ctx, filepath.Join(dir, "kubeconfig"), scn)
	}
	if a, b := normalized(runs[0]), normalized(runs[1]); a != b {
		t.Errorf("the two runs' runbooks differ:\nrun 1:\n%s\nrun 2:\n%s", a, b)
	}

	// down returns only when every process the cluster started has exited
	// and its ports can be bound.
	procs, err := localcluster.State(filepath.Join(dir, "cluster"))
	if err != nil || len(procs) < 7 {
		t.Fatalf("the demo cluster's processes: %v %+v", err, procs)
	}
	if _, err := demo("down"); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(p.Pid) + "/exe"); err == nil && strings.TrimSuffix(exe, " (deleted)") == p.Bin {
			t.Errorf("%s (pid %d) still runs after demo down", p.Name, p.Pid)
		}
		for _, port := range p.Ports {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				t.Errorf("%s's port %d still taken after demo down: %v", p.Name, port, err)
				continue
			}
			l.Close()
		}
	}
}

// runDemo runs hack/demo.sh as `make demo` does once bin/ is built, with
// the demo's state in dir.
func runDemo(t *testing.T, ctx context.Context, root, dir, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "demo.sh"), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEMO_DIR="+dir, "BIN_DIR="+bin)
	began := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("hack/demo.sh %s (%s, err %v):\n%s", strings.Join(args, " "), time.Since(began).Round(time.Second), err, out)
	return string(out), err
}

var runID = regexp.MustCompile(`gd-[0-9]{8}-[0-9]{6}-[0-9a-f]+`)

// normalized is what two runs of the runbook must share: each step's
// title, commands (the drain's run id aside), exit codes, and whether it
// was skipped or failed.
func normalized(rb runbookJSON) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "ok %v checkpointed %v lost %v\n", rb.OK, rb.Checkpointed, rb.GPUSecondsLost)
	for _, s := range rb.Steps {
		fmt.Fprintf(&sb, "%s: exit %d of %d, skipped %q, error %q\n", s.Title, s.ExitCode, s.Expected, s.Skipped, s.Error)
		for _, c := range s.Commands {
			fmt.Fprintf(&sb, "  %s\n", runID.ReplaceAllString(c, "gd-RUN"))
		}
	}
	return sb.String()
}

// checkRunbook checks one run: every step ran with the exit code the
// runbook expects, the gang's checkpoint-and-yield happened, nothing lost.
func checkRunbook(t *testing.T, run int, scn *scenario.Scenario, rb runbookJSON, b []byte, out string) {
	t.Helper()
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
		t.Fatalf("run %d: runbook ok=%v with %d steps, want %d:\n%s", run, rb.OK, len(rb.Steps), len(want), b)
	}
	for i, w := range want {
		s := rb.Steps[i]
		cmds := strings.Join(s.Commands, "\n")
		if s.Skipped != "" || s.Error != "" || s.ExitCode != w.exit || s.Expected != w.exit || !strings.Contains(cmds, w.command) {
			t.Errorf("run %d: step %d %q: exit %d (expected %d, want %d), skipped %q, error %q, commands:\n%s\nwant one containing %q",
				run, i+1, s.Title, s.ExitCode, s.Expected, w.exit, s.Skipped, s.Error, cmds, w.command)
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
	text := out
	for _, sub := range []string{
		"export KUBECONFIG=",
		"gpufleet-checkpoint-agent --namespace " + scn.Gang.Namespace + " --root JobSet/" + scn.Gang.JobSet,
		"[trainer llama-pretrain] request.json: checkpoint requested",
		"[trainer llama-pretrain] step 12000 saved",
		"[trainer llama-pretrain] stopped: request gd-",
		"[agent]",
		"answering ready-to-stop",
		"0 regressions against the baseline",
		"SIMULATED",
		"GPU-seconds of training lost: 0",
		"A plain kubectl drain would have lost about",
	} {
		if !strings.Contains(text, sub) {
			t.Errorf("run %d: output lacks %q", run, sub)
		}
	}
	if !rb.Checkpointed || rb.GPUSecondsLost != 0 || rb.PlainDrainLossGPUSeconds <= 0 {
		t.Errorf("run %d: checkpointed %v, lost %v GPU-s, plain drain estimate %v GPU-s", run, rb.Checkpointed, rb.GPUSecondsLost, rb.PlainDrainLossGPUSeconds)
	}
	for _, sub := range []string{"no training gang", "left out", "retrying without"} {
		if strings.Contains(text, sub) {
			t.Errorf("run %d: the demo dropped part of its story: output says %q", run, sub)
		}
	}
}

// checkEndState reads the demo cluster after the runbook: the pool
// upgraded and schedulable, the gang readmitted by Kueue and running,
// storedVersions trimmed.
func checkEndState(t *testing.T, ctx context.Context, kubeconfig string, scn *scenario.Scenario) {
	t.Helper()
	cp, err := harness.Attach(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
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

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
