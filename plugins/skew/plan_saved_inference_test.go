package skew

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// plan --from-file with the version check's report (kubectl skew -o
// yaml, which reads no model Deployments) plans its GPU pools' drains as
// training pools, though h100-s serves a model behind a budget: the plan
// says so first ("Before you start" in the runbook), naming the report and
// the live command, as fleet plan --from-dir does per cluster. A live plan
// and a saved read of the GPU pools' workloads give no such warning.
func TestPlanFromFileWithoutInferenceRead(t *testing.T) {
	live := func() *cli.TestClientGetter { return getter(cluster("v1.37.2", surgeCluster()...)) }
	offline := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	saved := run(t, live(), "", "-o", "yaml").Out
	file := filepath.Join(t.TempDir(), "skew-report.yaml")
	if err := os.WriteFile(file, []byte(saved), 0o600); err != nil {
		t.Fatal(err)
	}
	const unread = "GPU pool(s) h100-f, h100-s: the saved report "
	const rest = " holds no read of their workloads (kubectl skew -o yaml does not read model Deployments), so this plan drains them as training pools (kubectl gang-drain run); a pool that serves models behind PodDisruptionBudgets must be planned live ("
	// The same words fleet plan --from-dir gives (pkg/fleetrun).
	if !strings.Contains(rest, "holds no read of their workloads (kubectl skew -o yaml does not read model Deployments), so this plan drains them as training pools") {
		t.Fatal("test words drifted")
	}

	rb := run(t, offline, "", "plan", "-f", file, "--target", "v1.38", "--runbook")
	before, _, _ := strings.Cut(rb.Out, "## Steps")
	want := "Before you start:\n\n- " + unread + file + rest + "kubectl skew plan --target v1.38 --hydrate-bandwidth SOURCE=RATE --runbook, against the cluster without --from-file) to drain paced by hydrate bandwidth (gang-drain run --inference) with its ETA\n"
	if rb.Err != "" || !strings.Contains(before, want) {
		t.Errorf("runbook: want first under Before you start:\n%s\ngot (exit %d):\n%s%s", want, rb.Code, before, rb.Err)
	}
	if !strings.Contains(rb.Out, "kubectl gang-drain run $NODES --timeout 1h") || strings.Contains(rb.Out, "kubectl gang-drain run --inference") {
		t.Errorf("runbook from the version check's report: want h100-s drained as a training pool:\n%s", rb.Out)
	}

	tbl := run(t, offline, "", "plan", "-f", file, "--target", "v1.38", "--color", "never")
	if !strings.Contains(tbl.Out, "WARNING: "+unread+file+rest+"kubectl skew plan --target v1.38 --hydrate-bandwidth SOURCE=RATE, against the cluster without --from-file)") {
		t.Errorf("table: no warning naming %s and the live plan:\n%s%s", file, tbl.Out, tbl.Err)
	}

	// From stdin, with the bandwidth the live plan would take.
	js := run(t, offline, saved, "plan", "-f", "-", "--target", "v1.38", "--hydrate-bandwidth", "object-store=1250M/s", "-o", "json")
	var rep PlanReport
	if err := json.Unmarshal([]byte(js.Out), &rep); err != nil || len(rep.Warnings) == 0 {
		t.Fatalf("-o json: %v\n%s%s", err, js.Out, js.Err)
	}
	if w := rep.Warnings[0]; w != unread+"read from stdin"+rest+"kubectl skew plan --target v1.38 --hydrate-bandwidth object-store=1250M/s, against the cluster without --from-file) to drain paced by hydrate bandwidth (gang-drain run --inference) with its ETA" {
		t.Errorf("-o json: first warning %q", w)
	}

	// Live, and from a saved inventory that holds the inference read: no
	// warning, and h100-s drains as an inference pool.
	l := run(t, live(), "", "plan", "--target", "v1.38", "--runbook")
	_, inv, err := collectInventory(context.Background(), live(), testDeps(), "", 500, false, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	read, err := yaml.Marshal(map[string]any{"apiVersion": cli.APIVersion, "kind": KindSkewReport, "inventory": inv})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, offline, string(read), "plan", "-f", "-", "--target", "v1.38", "--runbook")
	for name, out := range map[string]string{"live": l.Out + l.Err, "saved with the inference read": r.Out + r.Err} {
		if strings.Contains(out, "holds no read of their workloads") || !strings.Contains(out, "kubectl gang-drain run --inference") {
			t.Errorf("%s: want no warning and h100-s drained as an inference pool:\n%s", name, out)
		}
	}
}
