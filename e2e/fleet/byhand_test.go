//go:build e2e

package fleete2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	golden "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// handRun is a run stepped by hand (no Argo): `kubectl skew fleet step`
// per step, as a person or a script runs it, against the package's
// planes, the store on the S3 server.
type handRun struct {
	e     *fleetEnv
	run   string
	store string
	file  string
	// transcript collects the commands and what they printed.
	transcript []string
}

// skew runs kubectl-skew and returns the result, whatever its exit.
func (h *handRun) skew(t *testing.T, args ...string) plugintest.Result {
	t.Helper()
	return h.e.run(t, "kubectl-skew", args...)
}

// step runs one step of a cluster by hand and decodes its -o json.
func (h *handRun) step(t *testing.T, cluster, step string) (fleetrun.StepResult, plugintest.Result) {
	t.Helper()
	r := h.skew(t, "fleet", "step", "--store", h.store, "--run", h.run, "--cluster", cluster, "--step", step, "-o", "json")
	var res fleetrun.StepResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("fleet step %s/%s: %v\n%s", cluster, step, err, r)
	}
	if res.ExitCode != r.ExitCode {
		t.Errorf("fleet step %s/%s exited %d, its result says %d", cluster, step, r.ExitCode, res.ExitCode)
	}
	return res, r
}

// stepsUntil runs a cluster's steps in the plan's order up to (not
// including) stop, each expected to complete.
func (h *handRun) stepsUntil(t *testing.T, p *fleetrun.Plan, cluster, stop string) {
	t.Helper()
	c, _ := p.Cluster(cluster)
	for _, s := range c.Steps {
		if s.Name == stop {
			return
		}
		if res, r := h.step(t, cluster, s.Name); r.ExitCode != 0 {
			t.Fatalf("step %s/%s: exit %d: %s", cluster, s.Name, r.ExitCode, res.Message)
		}
	}
	t.Fatalf("cluster %s has no step %s", cluster, stop)
}

// say records a command and its output for the transcript.
// plan writes the Fleet file y, plans the run from it and reads the plan
// back from the store.
func (h *handRun) plan(ctx context.Context, t *testing.T, y string) (fleetrun.Store, *fleetrun.Plan) {
	t.Helper()
	if err := os.WriteFile(h.file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := h.skew(t, "fleet", "plan", "-f", h.file, "--run", h.run); r.ExitCode != 0 {
		t.Fatalf("plan: %s", r)
	}
	st := (&scenario{store: h.store}).openStore(t)
	p, err := fleetrun.ReadPlan(ctx, st, h.run)
	if err != nil {
		t.Fatal(err)
	}
	return st, p
}

func (h *handRun) say(cmd, out string) {
	h.transcript = append(h.transcript, "$ "+cmd+"\n"+strings.TrimRight(out, "\n"))
}

// decide runs approve or skip as a person, with their own credentials
// for the management cluster, and returns what it printed.
func (h *handRun) decide(t *testing.T, verb, who string, args ...string) string {
	t.Helper()
	all := append([]string{"fleet", verb, "--store", h.store, "--run", h.run}, args...)
	r := h.e.runAs(t, who, "kubectl-skew", all...)
	if r.ExitCode != 0 {
		t.Fatalf("kubectl skew %s (as %s): %s", strings.Join(all, " "), who, r)
	}
	shown := []string{"kubectl skew fleet", verb, "--kubeconfig", who + ".kubeconfig", "--store", storeShown, "--run", h.run}
	for _, a := range args {
		if strings.Contains(a, " ") {
			a = fmt.Sprintf("%q", a)
		}
		shown = append(shown, a)
	}
	h.say(strings.Join(shown, " "), r.Stdout+r.Stderr)
	return r.Stdout + r.Stderr
}

// storeShown is how the transcript names the S3 store (its URL carries
// the test server's port).
const storeShown = "'s3://fleet/byhand?…'"

// sayStep records a step run as a script runs it: the result (-o json)
// to a file, the progress and the error on stderr.
func (h *handRun) sayStep(cluster, step string, r plugintest.Result) {
	h.say(fmt.Sprintf("kubectl skew fleet step --store %s --run %s --cluster %s --step %s -o json > result.json", storeShown, h.run, cluster, step), r.Stderr)
}

// evidence reads an attempt's evidence file from the store.
func evidenceFile(t *testing.T, st fleetrun.Store, keys []string, name string) string {
	t.Helper()
	for _, k := range keys {
		if strings.HasSuffix(k, "/"+name) {
			b, err := st.Read(context.Background(), k)
			if err != nil {
				t.Fatalf("evidence %s: %v", k, err)
			}
			return string(b)
		}
	}
	t.Fatalf("no %s in evidence %v", name, keys)
	return ""
}

// providerScript is the pool command of the by-hand run: a provider CLI's
// exits as the AWS CLI documents them (252 bad parameter, 255 failure), and
// an asynchronous upgrade that answers 0 before the nodes move. Each call
// is appended to calls.log beside it.
const providerScript = `#!/bin/sh
# provider.sh --kubeconfig FILE --context CONTEXT CLUSTER SELECTOR VERSION
dir=$(dirname "$0")
shift 4
echo "$1 $2" >> "$dir/calls.log"
case "$1/$2" in
canary/*)
  echo "An error occurred (ResourceInUseException) when calling the UpdateNodegroupVersion operation: Nodegroup gpu-a is currently being updated" >&2
  exit 255 ;;
prod/node-role.kubernetes.io/control-plane)
  echo '{"update": {"id": "upd-1", "status": "InProgress"}}'
  exit 0 ;;
*)
  echo "aws: error: argument --kubernetes-version: expected one argument" >&2
  exit 252 ;;
esac
`

// TestFleetByHand steps a two-ring run by hand through what a real fleet
// meets: ring east (canary and prod, one at a time, a failure budget of
// one, two approvers, a one-hour soak) and ring train (the training cell,
// under a freeze that starts inside its first step). Canary's drain
// carries its own eviction timeout; prod has a control-plane node whose
// pool steps act on it; the provider's command fails on canary (255: the
// cluster leaves the run within the budget, the ring goes on) and on
// prod's GPU pool (252: past the budget, ring east halts and the halt
// holds ring train); two people lift the halt and skip prod; ring train
// then waits for the soak read from the store, the same after the run is
// planned again, and for the freeze.
func TestFleetByHand(t *testing.T) {
	e := env(t)
	began := time.Now()
	ctx := context.Background()
	e.resetPools(t, canary, prod, training)
	// A control-plane node of prod on the old kubelet: its role label's
	// value is empty, as kubeadm sets it.
	cpNode := controlPlaneNode("byhand-cp-0", oldKubelet)
	prodCP := e.planes[prod]
	if _, err := prodCP.Client.CoreV1().Nodes().Create(ctx, cpNode, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prodCP.Client.CoreV1().Nodes().Delete(context.Background(), cpNode.Name, metav1.DeleteOptions{})
	})
	if err := harness.Eventually(ctx, "node "+cpNode.Name+" Ready", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := prodCP.Client.CoreV1().Nodes().Get(ctx, cpNode.Name, metav1.GetOptions{})
		return err == nil && harness.NodeReady(n), nil
	}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	script := filepath.Join(dir, "provider.sh")
	if err := os.WriteFile(script, []byte(providerScript), 0o755); err != nil {
		t.Fatal(err)
	}
	freezeFrom := time.Now().UTC().Add(3 * time.Minute).Truncate(time.Second)
	freezeTo := freezeFrom.Add(2 * time.Hour)
	h := &handRun{e: e, run: "byhand", store: e.s3Store("byhand"), file: filepath.Join(dir, "fleet.yaml")}
	y := fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: byhand}
spec:
  target: {version: %s}
  clusters:
  - {name: canary, labels: {gpufleet.dev/ring: east}, drain: {evictionTimeout: 600s}}
  - {name: prod, labels: {gpufleet.dev/ring: east}}
  - {name: training, labels: {gpufleet.dev/ring: train}}
  rings:
  - {name: east, selector: {matchLabels: {gpufleet.dev/ring: east}}, maxConcurrent: 1, maxFailures: 1, soak: 1h, approval: {approvers: 2}}
  - {name: train, selector: {matchLabels: {gpufleet.dev/ring: train}}}
  credentials: {secretNamespace: argo}
  haltOn:
  - {check: nodes-not-ready, maxPercent: 0}
  freezes:
  - {start: %q, end: %q, selector: {matchLabels: {gpufleet.dev/ring: train}}, reason: year-end change freeze}
  upgrade:
    stepDuration: 10m
    drain: {onTimeout: stop, ackTimeout: 3s}
    actions:
    - command:
        pool: "%s --kubeconfig {{.Kubeconfig}} --context {{.Context}} {{.Cluster}} {{.Selector}} {{.Version}}"
  store: {url: %q}
`, target, freezeFrom.Format(time.RFC3339), freezeTo.Format(time.RFC3339), script, h.store)
	if err := os.WriteFile(h.file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	st := (&scenario{store: h.store}).openStore(t)
	var gangRuns []struct{ cluster, id string }
	t.Cleanup(func() {
		// The drains the failed upgrades left: restored as the on-call
		// would, so the nodes carry no unfinished gang-drain run.
		for _, g := range gangRuns {
			r := plugintest.RunCmd(t, filepath.Join(plugintest.BinDir(t), "kubectl-gang_drain"), plugintest.Cmd{Args: []string{"restore", g.id, "--kubeconfig", e.planes[g.cluster].Kubeconfig}})
			if r.ExitCode != 0 {
				t.Logf("gang-drain restore %s on %s: %s", g.id, g.cluster, r)
			}
		}
		e.resetPools(t, canary, prod)
	})

	// The plan: prod's control-plane pool selected by the role label
	// alone, canary's drain with its own eviction timeout, each ring's
	// projected timeline.
	r := h.skew(t, "fleet", "plan", "-f", h.file, "--run", h.run)
	if r.ExitCode != 0 {
		t.Fatalf("plan: %s", r)
	}
	h.say("kubectl skew fleet plan -f fleet.yaml --run byhand", r.Stdout+r.Stderr)
	wide := h.skew(t, "fleet", "plan", "-f", h.file, "--run", h.run, "-o", "wide")
	if !strings.Contains(wide.Stdout, "--eviction-timeout 10m0s") && !strings.Contains(wide.Stdout, "--eviction-timeout 600s") {
		t.Errorf("the plan does not show canary's eviction timeout:\n%s", wide.Stdout)
	}
	for _, want := range []string{"ring east: ", "projected ", "failure budget 1", "then soak 1h"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.Stdout)
		}
	}
	p, err := fleetrun.ReadPlan(ctx, st, h.run)
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := p.Cluster(prod)
	var cpSteps []fleetrun.Step
	for _, s := range pc.Steps {
		if s.Pool == "control-plane" {
			cpSteps = append(cpSteps, s)
			if s.Selector != "node-role.kubernetes.io/control-plane" || s.Nodes != 1 {
				t.Errorf("prod step %s: selector %q, %d nodes; want the role label alone and 1 node", s.Name, s.Selector, s.Nodes)
			}
		}
	}
	if len(cpSteps) == 0 {
		t.Fatalf("no control-plane pool step for prod: %v", pc.Steps)
	}
	cpUpgrade := "pool-control-plane-1-37-upgrade"
	gpuUpgrade := "pool-" + pools[prod] + "-1-37-upgrade"
	drain := "pool-" + pools[canary] + "-1-37-drain"

	// Ring east needs two approvals before anything starts.
	res, r := h.step(t, canary, "gate")
	h.sayStep(canary, "gate", r)
	if r.ExitCode != 4 || !strings.Contains(res.Message, "0 of 2 approvals") {
		t.Errorf("gate before the approvals: exit %d: %s", r.ExitCode, res.Message)
	}
	h.decide(t, "approve", "alice", "--ring", "east", "--reason", "change CHG-7 approved")
	h.decide(t, "approve", "bob", "--ring", "east", "--reason", "second pair of eyes")

	// Canary first; prod waits for the ring's one place in flight.
	h.stepsUntil(t, p, canary, "pool-"+pools[canary]+"-1-37-upgrade")
	res, r = h.step(t, prod, "gate")
	h.sayStep(prod, "gate", r)
	if r.ExitCode != 4 || !strings.Contains(res.Message, "caps") {
		t.Errorf("prod's gate with canary in flight: exit %d: %s", r.ExitCode, res.Message)
	}
	// Canary's drain ran with its own eviction timeout.
	_, states := h.states(t, st, p)
	d := states[canary].Step(drain)
	gangRuns = append(gangRuns, struct{ cluster, id string }{canary, d.RunID})
	if meta := evidenceFile(t, st, d.Evidence, "meta.json"); !strings.Contains(meta, `"--eviction-timeout",`) || !strings.Contains(meta, `"10m0s"`) && !strings.Contains(meta, `"600s"`) {
		t.Errorf("canary's drain did not run with its eviction timeout:\n%s", meta)
	}

	// 255 from the provider's command: a failure with its output in the
	// evidence, within the budget: canary leaves the run.
	res, r = h.step(t, canary, "pool-"+pools[canary]+"-1-37-upgrade")
	h.sayStep(canary, "pool-"+pools[canary]+"-1-37-upgrade", r)
	if r.ExitCode != fleetrun.ExitLeftRun || res.Phase != fleetrun.PhaseFailed ||
		!strings.Contains(res.Message, "exited 255") || !strings.Contains(res.Message, "within its failure budget of 1") {
		t.Errorf("canary's upgrade: exit %d, phase %s: %s", r.ExitCode, res.Phase, res.Message)
	}
	if out := evidenceFile(t, st, res.Evidence, "stderr.log"); !strings.Contains(out, "ResourceInUseException") {
		t.Errorf("the command's output is not in the evidence: %q", out)
	}
	// The ring goes on: prod takes the free place.
	res, r = h.step(t, prod, "gate")
	h.sayStep(prod, "gate", r)
	if r.ExitCode != 0 {
		t.Fatalf("prod's gate after canary left: exit %d: %s", r.ExitCode, res.Message)
	}
	// Prod's control-plane pool: drained and upgraded on the
	// control-plane node itself.
	h.stepsUntil(t, p, prod, cpUpgrade)
	if n, err := prodCP.Client.CoreV1().Nodes().Get(ctx, cpNode.Name, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("the control-plane pool's drain did not cordon %s: %v", cpNode.Name, err)
	}
	// The provider answers 0 before the node moves: not yet; asked again,
	// the step does not issue it a second time; once the node is on the
	// target, the step is done without issuing anything.
	res, _ = h.step(t, prod, cpUpgrade)
	if res.ExitCode != 4 || !strings.Contains(res.Message, "1 of 1 nodes of pool control-plane are not on kubelet 1.37 yet") {
		t.Errorf("control-plane pool upgrade, first attempt: exit %d: %s", res.ExitCode, res.Message)
	}
	res, r = h.step(t, prod, cpUpgrade)
	h.sayStep(prod, cpUpgrade, r)
	if res.ExitCode != 4 || !strings.Contains(res.Message, "in flight: attempt 1 issued the upgrade") {
		t.Errorf("control-plane pool upgrade, second attempt: exit %d: %s", res.ExitCode, res.Message)
	}
	n, err := prodCP.Client.CoreV1().Nodes().Get(ctx, cpNode.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.KubeletVersion = target // the provider's upgrade lands
	if _, err := prodCP.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res, r = h.step(t, prod, cpUpgrade)
	h.sayStep(prod, cpUpgrade, r)
	if res.ExitCode != 0 || !strings.Contains(res.Message, "already done, nothing issued") || !strings.Contains(res.Message, fleetrun.QuadrantDone) {
		t.Errorf("control-plane pool upgrade once the node moved: exit %d: %s", res.ExitCode, res.Message)
	}
	if res, _ := h.step(t, prod, cpUpgrade); res.ExitCode != 0 || res.Skipped == "" {
		t.Errorf("a re-run after success: %+v", res)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	if got := strings.Count(string(calls), "prod node-role.kubernetes.io/control-plane"); got != 1 {
		t.Errorf("the provider's command ran %d times for prod's control-plane pool, want 1:\n%s", got, calls)
	}

	// 252 on prod's GPU pool: the second failure, past the budget: ring
	// east halts, once.
	h.stepsUntil(t, p, prod, gpuUpgrade)
	_, states = h.states(t, st, p)
	gangRuns = append(gangRuns, struct{ cluster, id string }{prod, states[prod].Step("pool-" + pools[prod] + "-1-37-drain").RunID})
	res, r = h.step(t, prod, gpuUpgrade)
	h.sayStep(prod, gpuUpgrade, r)
	if r.ExitCode != 1 || res.Phase != fleetrun.PhaseFailed || !strings.Contains(res.Message, "exited 252") ||
		!strings.Contains(res.Message, "2 failed in ring east (canary, prod), past its failure budget of 1: ring east halts") {
		t.Errorf("prod's GPU pool upgrade: exit %d, phase %s: %s", r.ExitCode, res.Phase, res.Message)
	}
	if out := evidenceFile(t, st, res.Evidence, "stderr.log"); !strings.Contains(out, "expected one argument") {
		t.Errorf("the command's output is not in the evidence: %q", out)
	}
	// The halt of ring east holds ring train: its gate starts nothing and
	// records nothing.
	res, r = h.step(t, training, "gate")
	h.sayStep(training, "gate", r)
	if r.ExitCode != 1 || !strings.Contains(res.Message, "ring east is halted") || !strings.Contains(res.Message, "nothing started") ||
		!strings.Contains(r.Stderr, "after the fix: kubectl skew fleet approve --run byhand --ring east --reason ... (by 2 distinct people)") {
		t.Errorf("ring train's gate under east's halt: exit %d: %s\n%s", r.ExitCode, res.Message, r.Stderr)
	}
	if _, states := h.states(t, st, p); states[training].Step("gate").Attempt != 0 {
		t.Errorf("a gate refused by a halt was recorded: %+v", states[training].Step("gate"))
	}
	ds, err := fleetrun.ReadDecisions(ctx, st, h.run)
	if err != nil {
		t.Fatal(err)
	}
	halts := 0
	for _, d := range ds {
		if d.Decision == fleetrun.DecisionHalt {
			halts++
		}
	}
	if halts != 1 {
		t.Errorf("%d halts recorded, want 1: %+v", halts, ds)
	}

	// Lifting the halt takes the ring's two approvers; skipping prod
	// too.
	out := h.decide(t, "approve", "alice", "--ring", "east", "--reason", "prod's pool upgrade needs a fixed command; skipping it")
	if !strings.Contains(out, "1 of 2 distinct approvers") {
		t.Errorf("one approver of two:\n%s", out)
	}
	if res, _ := h.step(t, training, "gate"); res.ExitCode != 1 {
		t.Errorf("one approver lifted a two-approver halt: %s", res.Message)
	}
	h.decide(t, "approve", "bob", "--ring", "east", "--reason", "agreed")
	out = h.decide(t, "skip", "alice", "--cluster", prod, "--reason", "its GPU pool is upgraded in the next change")
	out = h.decide(t, "skip", "bob", "--cluster", prod, "--reason", "agreed")
	if !strings.Contains(out, "2 of 2 people") {
		t.Errorf("skip by two people:\n%s", out)
	}

	// Ring east is decided (canary failed within the budget, prod
	// skipped): ring train waits for the soak, from the store, and for
	// the freeze that starts inside its first step.
	res, r = h.step(t, training, "gate")
	h.sayStep(training, "gate", r)
	if r.ExitCode != 4 || !strings.Contains(res.Message, "soak: ring east finished at") {
		t.Fatalf("ring train's gate after the skip: exit %d: %s", r.ExitCode, res.Message)
	}
	soak := res.Message
	// A wait that only the clock ends is no attempt: it writes no
	// evidence and answers its next opening. The read-only gate gives
	// its checks.
	if len(res.Evidence) != 0 || res.NextAt == nil {
		t.Errorf("ring train's clock-held gate: evidence %v, next opening %v; want none and one", res.Evidence, res.NextAt)
	}
	gj := h.skew(t, "fleet", "gate", "--store", h.store, "--run", h.run, "--cluster", training, "-o", "json")
	var gate fleetrun.GateReport
	if err := json.Unmarshal([]byte(gj.Stdout), &gate); err != nil {
		t.Fatalf("fleet gate -o json: %v\n%s", err, gj)
	}
	froze := false
	for _, c := range gate.Checks {
		froze = froze || (c.Name == "window" && c.Result == fleetrun.CheckWait && strings.Contains(c.Message, "would run into the") &&
			strings.Contains(c.Message, "year-end change freeze") && strings.Contains(c.Message, freezeTo.Format(time.RFC3339)))
	}
	if !froze {
		t.Errorf("ring train's gate does not wait for the freeze starting inside its first step: %+v", gate.Checks)
	}
	// The read-only gate lists every check: the soak and the freeze.
	preview := h.skew(t, "fleet", "gate", "--store", h.store, "--run", h.run, "--cluster", training)
	h.say("kubectl skew fleet gate --store "+storeShown+" --run byhand --cluster training", preview.Stdout+preview.Stderr)
	if preview.ExitCode != 4 || !strings.Contains(preview.Stdout, "would run into the freeze") || !strings.Contains(preview.Stdout, "soak 1h: opens at") {
		t.Errorf("gate preview of training: %s", preview)
	}
	// Planned again (a resubmitted run): the frozen plan is kept and the
	// soak still opens at the time the store gives.
	r = h.skew(t, "fleet", "plan", "-f", h.file, "--run", h.run)
	h.say("kubectl skew fleet plan -f fleet.yaml --run byhand > plan.txt", r.Stderr)
	if r.ExitCode != 0 || !strings.Contains(r.Stderr, "is kept") {
		t.Errorf("plan again: %s", r)
	}
	res, r = h.step(t, training, "gate")
	h.sayStep(training, "gate", r)
	if res.ExitCode != 4 || res.Message != soak {
		t.Errorf("soak after the run was planned again: %s; before: %s", res.Message, soak)
	}
	status := h.skew(t, "fleet", "status", "--store", h.store, "--run", h.run)
	h.say("kubectl skew fleet status --store "+storeShown+" --run byhand", status.Stdout)
	for _, want := range []string{"1 (budget 1)", "skipped"} {
		if !strings.Contains(status.Stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, status.Stdout)
		}
	}

	// Every attempt's evidence is in the store.
	_, states = h.states(t, st, p)
	for _, c := range p.Clusters {
		for _, ss := range states[c.Name].Steps {
			if ss.Attempt == 0 {
				continue
			}
			metas := 0
			for _, k := range ss.Evidence {
				if strings.HasSuffix(k, "/meta.json") {
					metas++
				}
				if _, err := st.Read(ctx, k); err != nil {
					t.Errorf("%s/%s: evidence %s: %v", c.Name, ss.Name, k, err)
				}
			}
			if metas != ss.Attempt {
				t.Errorf("%s/%s: %d attempts, %d meta.json in the store", c.Name, ss.Name, ss.Attempt, metas)
			}
		}
	}
	t.Logf("by-hand run took %s", time.Since(began).Round(time.Second))
	// README's transcript of a run by hand is this one, times masked.
	transcript := strings.ReplaceAll(strings.Join(h.transcript, "\n\n")+"\n", h.store, "s3://fleet/byhand?…")
	golden.Check(t, "byhand-transcript.txt", maskTimes(transcript))
}

var (
	rfc3339Second = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	rfc3339Minute = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\dZ`)
	decisionKey   = regexp.MustCompile(`decisions/\d{8}T[0-9.]+Z-(\w+)-[0-9a-f]+\.json`)
	// shortenedTime is the start of a time a table cell cut short.
	shortenedTime = regexp.MustCompile(`\d{4}-[0-9T:-]*…`)
)

// maskTimes replaces the run's times (which change with every run) by
// placeholders of the same width, so tables keep their columns.
func maskTimes(s string) string {
	s = decisionKey.ReplaceAllString(s, "decisions/<time>-$1-<id>.json")
	s = rfc3339Second.ReplaceAllString(s, "YYYY-MM-DDThh:mm:ssZ")
	s = rfc3339Minute.ReplaceAllString(s, "YYYY-MM-DDThh:mmZ")
	return shortenedTime.ReplaceAllStringFunc(s, func(m string) string {
		return "YYYY-MM-DDThh:mm:ssZ"[:len(m)-len("…")] + "…"
	})
}

// controlPlaneNode is a KWOK control-plane node without GPUs or a pool
// label: its role label's value is empty, as kubeadm sets it.
func controlPlaneNode(name, kubelet string) *corev1.Node {
	n := harness.GPUNode(name, harness.GPUPool{Name: "cp", KubeletVersion: kubelet}, "")
	delete(n.Labels, harness.PoolLabel)
	delete(n.Status.Capacity, "nvidia.com/gpu")
	delete(n.Status.Allocatable, "nvidia.com/gpu")
	n.Labels["node-role.kubernetes.io/control-plane"] = ""
	return n
}

// states reads every cluster's state.
func (h *handRun) states(t *testing.T, st fleetrun.Store, p *fleetrun.Plan) (*fleetrun.Plan, map[string]*fleetrun.ClusterState) {
	t.Helper()
	states, err := fleetrun.ReadStates(context.Background(), st, p)
	if err != nil {
		t.Fatal(err)
	}
	return p, states
}

// TestFleetByHandStepOverNoNode: a pool that loses its nodes after the
// plan (here the only node of pool "spare" is gone) fails its first pool
// step instead of passing over nothing.
func TestFleetByHandStepOverNoNode(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	e.resetPools(t, canary)
	cp := e.planes[canary]
	spare := harness.GPUNode("spare-0", harness.GPUPool{Name: "a-spare", KubeletVersion: oldKubelet}, "")
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, spare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), spare.Name, metav1.DeleteOptions{})
	})
	dir := t.TempDir()
	h := &handRun{e: e, run: "nonode", store: "file://" + filepath.Join(dir, "store"), file: filepath.Join(dir, "fleet.yaml")}
	y := fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: nonode}
spec:
  target: {version: %s}
  clusters:
  - {name: canary, labels: {gpufleet.dev/ring: canary}}
  rings:
  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}}
  credentials: {secretNamespace: argo}
  upgrade:
    actions:
    - command:
        pool: "democluster upgrade-pool --kubeconfig {{.Kubeconfig}} --context {{.Context}} --selector {{.Selector}} --kubelet {{.Version}}"
  store: {url: %q}
`, target, h.store)
	_, p := h.plan(ctx, t, y)
	step := "pool-a-spare-1-37-pdb-blockers"
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, spare.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.stepsUntil(t, p, canary, step)
	res, r := h.step(t, canary, step)
	if r.ExitCode != 1 || res.Phase != fleetrun.PhaseFailed ||
		!strings.Contains(res.Message, "selector cloud.google.com/gke-nodepool=a-spare of pool a-spare matches no node (the plan counted 1)") {
		t.Errorf("a step over no node: exit %d, phase %s: %s", r.ExitCode, res.Phase, res.Message)
	}
}
