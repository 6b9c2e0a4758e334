package fleetrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakekube "k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// fakeExec answers each command by its binary and first argument; it
// records every command and, for the pool upgrade, moves the fake nodes to
// the new kubelet, as a provider would.
type fakeExec struct {
	mu    sync.Mutex
	calls [][]string
	// envs has each call's extra environment, as calls has its argv.
	envs  [][]string
	codes map[string]int
	nodes map[string]*fakekube.Clientset
	// block, when set, makes drain wait until the context ends.
	block bool
	// signals kills a command by a signal (by key, as codes).
	signals map[string]string
	// lazy leaves the nodes where they are after a successful pool
	// upgrade: the provider's update is in flight.
	lazy bool
}

func (e *fakeExec) Run(ctx context.Context, argv []string, env []string, stdout, stderr io.Writer) (Exit, error) {
	e.mu.Lock()
	e.calls = append(e.calls, argv)
	e.envs = append(e.envs, env)
	key := argv[0]
	if len(argv) > 1 {
		key += " " + argv[1]
	}
	code := e.codes[key]
	e.mu.Unlock()
	if key == BinGangDrain+" run" && e.block {
		<-ctx.Done()
		return Exit{Code: 130}, nil
	}
	if key == BinSkew+" preflight" {
		for i, a := range argv {
			if a == "--save" {
				if err := writeFile(argv[i+1], "kind: PreflightReport\n"); err != nil {
					return Exit{}, err
				}
			}
		}
	}
	if sig := e.signals[key]; sig != "" {
		fmt.Fprintf(stdout, "partial output of %s\n", key)
		fmt.Fprintf(stderr, "partial progress of %s\n", key)
		return Exit{Code: 137, Signal: sig}, nil
	}
	if argv[0] == "upgrade-pool" && code == 0 && !e.lazy {
		k := e.nodes[argv[2]]
		nodes, _ := k.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			n.Status.NodeInfo.KubeletVersion = "v1.38.0"
			_, _ = k.CoreV1().Nodes().UpdateStatus(ctx, &n, metav1.UpdateOptions{})
		}
	}
	fmt.Fprintf(stdout, `{"kind":"Fake","command":%q}`+"\n", strings.Join(argv, " "))
	fmt.Fprintf(stderr, "progress of %s\n", key)
	return Exit{Code: code}, nil
}

func (e *fakeExec) commands() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, c := range e.calls {
		out = append(out, strings.Join(c, " "))
	}
	return out
}

func gpuNode(name, kubelet string, ready bool) *corev1.Node {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"cloud.google.com/gke-nodepool": "gpu-a"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{GPUResource: resource.MustParse("8")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: kubelet},
		},
	}
}

type harness struct {
	p     *Programme
	exec  *fakeExec
	kube  map[string]*fakekube.Clientset
	clock time.Time
}

// newHarness freezes a run of the fixture fleet, every cluster a fake
// clientset with two Ready GPU nodes on kubelet 1.35.
func newHarness(t *testing.T, mutate func(*fleetfile.Fleet)) *harness {
	t.Helper()
	f := loadFleet(t, mutate)
	plan := mustPlan(t, f, infos(f, nil), monday0930)
	plan.Run = "r1"
	return harnessFor(t, plan)
}

// harnessFor freezes plan (run r1) in a new store, every cluster a fake
// clientset with two Ready GPU nodes on kubelet 1.35.
func harnessFor(t *testing.T, plan *Plan) *harness {
	t.Helper()
	st := tempStore(t)
	if _, err := FreezePlan(context.Background(), st, plan, false); err != nil {
		t.Fatal(err)
	}
	h := &harness{exec: &fakeExec{codes: map[string]int{}, nodes: map[string]*fakekube.Clientset{}}, kube: map[string]*fakekube.Clientset{}, clock: monday0930}
	cg := cli.NewTestClientGetter()
	cg.PerContext = map[string]*cli.TestClientGetter{}
	for _, c := range plan.Clusters {
		k := fakekube.NewClientset(gpuNode(c.Name+"-n1", "v1.35.4", true), gpuNode(c.Name+"-n2", "v1.35.4", true))
		h.kube[c.Name] = k
		h.exec.nodes[c.Context] = k
		cg.PerContext[c.Context] = cli.NewTestClientGetter().WithKube(k)
	}
	h.p = &Programme{Store: st, Plan: plan, Access: &Access{Getter: cg}, Exec: h.exec, Holder: "test/1",
		Now: func() time.Time { return h.clock }}
	return h
}

func (h *harness) step(t *testing.T, cluster, step string) *StepResult {
	t.Helper()
	r, err := h.p.RunStep(context.Background(), cluster, step)
	if err != nil {
		t.Fatalf("%s/%s: %v", cluster, step, err)
	}
	return r
}

func (h *harness) state(t *testing.T, cluster string) *ClusterState {
	t.Helper()
	s, err := ReadState(context.Background(), h.p.Store, "r1", cluster, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runCluster runs every step of a cluster in order, as the engine would,
// and fails on any exit but 0.
func (h *harness) runCluster(t *testing.T, cluster string) {
	t.Helper()
	c, _ := h.p.Plan.Cluster(cluster)
	for _, s := range c.Steps {
		if r := h.step(t, cluster, s.Name); r.ExitCode != 0 {
			t.Fatalf("%s/%s: exit %d: %s", cluster, s.Name, r.ExitCode, r.Message)
		}
	}
}

func TestStepRunsAClusterIdempotently(t *testing.T) {
	h := newHarness(t, nil)
	h.runCluster(t, "canary-a")
	st := h.state(t, "canary-a")
	if st.FinishedAt == nil || st.AdmittedAt == nil || st.Baseline == "" {
		t.Fatalf("state %+v", st)
	}
	for _, s := range st.Steps {
		if s.Phase != PhaseCompleted || s.Attempt != 1 || s.InputsDigest == "" || len(s.Evidence) == 0 {
			t.Errorf("step %s: %+v", s.Name, s)
		}
	}
	cmds := strings.Join(h.exec.commands(), "\n")
	for _, want := range []string{
		"kubectl-skew preflight --target v1.38 --save ",
		"kubectl-pdb_blockers -l cloud.google.com/gke-nodepool=gpu-a --fail-on blocking --context canary-a -o json",
		"kubectl-gang_drain run -l cloud.google.com/gke-nodepool=gpu-a --run-id gd-r1-",
		"upgrade-pool --context canary-a --pool gpu-a --version v1.38",
		"kubectl-gpu_validate nodes -l cloud.google.com/gke-nodepool=gpu-a --context canary-a -o json",
		"kubectl-gang_drain restore gd-r1-",
		"kubectl-skew verify --baseline ",
	} {
		if !strings.Contains(cmds, want) {
			t.Errorf("commands lack %q:\n%s", want, cmds)
		}
	}
	// The drain and the restore name the same gang-drain run.
	drain, restore := st.Step("pool-gpu-a-1-38-drain").RunID, st.Step("pool-gpu-a-1-38-restore").RunID
	if drain == "" || drain != restore {
		t.Errorf("run ids %q and %q", drain, restore)
	}
	// Running again changes nothing: completed with the same inputs.
	n := len(h.exec.calls)
	c, _ := h.p.Plan.Cluster("canary-a")
	for _, s := range c.Steps {
		r := h.step(t, "canary-a", s.Name)
		if r.ExitCode != 0 || r.Skipped == "" || r.Attempt != 1 {
			t.Errorf("re-run of %s: %+v", s.Name, r)
		}
	}
	if len(h.exec.calls) != n {
		t.Errorf("re-running completed steps ran %d commands", len(h.exec.calls)-n)
	}
	// The latest pre-flight report is where the fleet report reads it.
	if b, err := h.p.Store.Read(context.Background(), LatestPreflightKey("canary-a")); err != nil || !json.Valid(b) {
		t.Errorf("latest preflight: %v %q", err, b)
	}
}

func TestStepExitCodes(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	// Out of order: not yet (exit 4), nothing runs.
	if r := h.step(t, "canary-a", "verify"); r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "not yet, run the steps in order") {
		t.Errorf("out of order: %+v", r)
	}
	// Unknown step and cluster: usage errors.
	if _, err := h.p.RunStep(ctx, "canary-a", "nope"); cli.ExitCode(err) != cli.ExitUsage {
		t.Errorf("unknown step: %v", err)
	}
	if _, err := h.p.RunStep(ctx, "nope", "gate"); cli.ExitCode(err) != cli.ExitUsage {
		t.Errorf("unknown cluster: %v", err)
	}
	h.step(t, "canary-a", "gate")
	h.step(t, "canary-a", "preflight-1-38")
	// A halting plugin (exit 1): the step fails, the ring halts.
	h.exec.codes[BinPDBBlockers+" -l"] = 1
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-pdb-blockers")
	if r.ExitCode != cli.ExitFindings || r.Phase != PhaseFailed {
		t.Fatalf("halting step: %+v", r)
	}
	ds, _ := ReadDecisions(ctx, h.p.Store, "r1")
	halt, ok := h.p.Plan.ActiveHalt(ds, "canary", "canary-b")
	if !ok {
		t.Fatal("a failed step halts its ring")
	}
	// Kept under the run's halts/, which the step's credentials may write,
	// not decisions/, which they need not.
	if !strings.HasPrefix(halt.Key, "runs/r1/halts/") || halt.Identity != nil {
		t.Errorf("the step's halt is kept at %s with identity %+v, want under runs/r1/halts/ with none", halt.Key, halt.Identity)
	}
	// The ring's other clusters do not start.
	if r := h.step(t, "canary-b", "gate"); r.ExitCode != cli.ExitFindings || !strings.Contains(r.Message, "halted by step pool-gpu-a-1-38-pdb-blockers of canary-a") {
		t.Errorf("gate of canary-b under a halt: %+v", r)
	}
	// Approve after the fix: the failed step runs again as attempt 2.
	h.exec.codes[BinPDBBlockers+" -l"] = 0
	if _, err := h.p.Decide(ctx, Decision{Run: "r1", Decision: DecisionApprove, Ring: "canary", Identity: &cli.Identity{User: "alice"}, At: h.clock.Add(time.Minute), Reason: "PDB fixed"}, DecideOptions{}); err != nil {
		t.Fatal(err)
	}
	h.clock = h.clock.Add(2 * time.Minute)
	r = h.step(t, "canary-a", "pool-gpu-a-1-38-pdb-blockers")
	if r.ExitCode != 0 || r.Attempt != 2 {
		t.Errorf("after approve: %+v", r)
	}
	st := h.state(t, "canary-a")
	if got := st.Step("preflight-1-38").Attempt; got != 1 {
		t.Errorf("preflight re-ran: attempt %d", got)
	}
	// Both attempts' evidence is kept, each under its own number.
	keys, _ := h.p.Store.List(ctx, "runs/r1/evidence/canary-a/pool-gpu-a-1-38-pdb-blockers/")
	if strings.Count(strings.Join(keys, " "), "/meta.json") != 2 {
		t.Errorf("evidence %v", keys)
	}
	// Evidence is never overwritten.
	if err := PutEvidence(ctx, h.p.Store, keys[0], []byte("x")); err == nil {
		t.Error("overwrote evidence")
	}
}

func TestStepWaitsForItsWindow(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = h.clock.Add(2 * time.Hour) // the canary ring's soak
	// Monday 09:30 in Los Angeles: the prod window (01:00-05:00) is closed.
	r := h.step(t, "prod-use1", "gate")
	if r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "next window that fits a 1h0m0s step opens at 2026-11-03T09:00:00Z") {
		t.Fatalf("closed window: %+v", r)
	}
	if st := h.state(t, "prod-use1"); st.AdmittedAt != nil {
		t.Error("admitted with the window closed")
	}
	// Tuesday 01:30 LA: open, with 3h30 left.
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC)
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != 0 {
		t.Fatalf("open window: %+v", r)
	}
	h.step(t, "prod-use1", "preflight-1-38")
	h.step(t, "prod-use1", "pool-gpu-a-1-38-pdb-blockers")
	// 04:00 LA: 1h left, less than a step and the 15m margin: the drain
	// (disruptive) waits for the next window, it does not start.
	h.clock = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	r = h.step(t, "prod-use1", "pool-gpu-a-1-38-drain")
	if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 {
		t.Fatalf("drain late in the window: %+v", r)
	}
	for _, c := range h.exec.commands() {
		if strings.Contains(c, "gang_drain run") && strings.Contains(c, "prod-use1") {
			t.Fatalf("drain started: %s", c)
		}
	}
}

func TestStepFreeze(t *testing.T) {
	h := newHarness(t, nil)
	h.clock = time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC)
	r := h.step(t, "canary-a", "gate")
	if r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "year-end freeze") || !strings.Contains(r.Message, "2027-01-05T00:00:00Z") {
		t.Fatalf("freeze: %+v", r)
	}
}

func TestApprovalsBeforeProd(t *testing.T) {
	h := newHarness(t, nil)
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC) // the prod window is open
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = h.clock.Add(2 * time.Hour) // the canary ring's soak
	ctx := context.Background()
	approve := func(who string) {
		t.Helper()
		if _, err := h.p.Decide(ctx, Decision{Run: "r1", Decision: DecisionApprove, Ring: "prod", Identity: &cli.Identity{User: who}, At: h.clock, Reason: "ok"}, DecideOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "0 of 2 approvals") {
		t.Fatalf("no approval: %+v", r)
	}
	approve("alice")
	approve("alice") // the same person twice is one approver
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "1 of 2 approvals (alice)") {
		t.Fatalf("one approver: %+v", r)
	}
	approve("bob")
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != 0 {
		t.Fatalf("two approvers: %+v", r)
	}
}

func TestGateHaltChecks(t *testing.T) {
	h := newHarness(t, nil)
	// One of two nodes not Ready: 50% > 10%.
	n := gpuNode("canary-a-n1", "v1.35.4", false)
	if _, err := h.kube["canary-a"].CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := h.step(t, "canary-a", "gate")
	if r.ExitCode != cli.ExitFindings || !strings.Contains(r.Message, "nodes-not-ready: 1 of 2 nodes not Ready (50.0%, at most 10%)") {
		t.Fatalf("gate: %+v", r)
	}
	if st := h.state(t, "canary-a"); st.AdmittedAt != nil || st.Step("gate").Phase != PhaseFailed {
		t.Errorf("state %+v", st)
	}
}

// TestCapsUnderConcurrentGates starts every gate of a ring at once, many
// times over: the store's lock never lets more clusters in flight than the
// cap.
func TestCapsUnderConcurrentGates(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) {
		f.Spec.Rings[0].MaxConcurrent = 0
		f.Spec.Caps.MaxConcurrentClusters = 2
		f.Spec.Caps.MaxGPUPercentInFlight = 0
	})
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i, c := range []string{"canary-a", "canary-b", "canary-c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.p.RunStep(context.Background(), c, "gate")
			if err != nil {
				t.Error(err)
				return
			}
			codes[i] = r.ExitCode
		}()
	}
	wg.Wait()
	admitted := 0
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		if h.state(t, c).AdmittedAt != nil {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("%d admitted under a cap of 2 (exit codes %v)", admitted, codes)
	}
}

// TestStepInterruptedResumes kills a drain mid-way: the attempt is recorded
// as not finished (exit 4), another process cannot start the same step
// while the heartbeat is fresh, and the next attempt resumes the same
// gang-drain run.
func TestStepInterruptedResumes(t *testing.T) {
	h := newHarness(t, nil)
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers"} {
		h.step(t, "canary-a", s)
	}
	h.exec.block = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *StepResult)
	go func() {
		r, err := h.p.RunStep(ctx, "canary-a", "pool-gpu-a-1-38-drain")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// While it runs, a second process is refused.
	other := *h.p
	other.Holder = "test/2"
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := h.state(t, "canary-a")
		if st.Step("pool-gpu-a-1-38-drain").Phase == PhaseInProgress {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the drain never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r, err := other.RunStep(context.Background(), "canary-a", "pool-gpu-a-1-38-drain")
	if err != nil || r.ExitCode != cli.ExitIncomplete || !strings.Contains(r.Message, "is running in test/1") {
		t.Fatalf("second runner: %+v %v", r, err)
	}
	// The step is in progress before its drain command starts; interrupt
	// the drain itself.
	for h.exec.count(BinGangDrain+" run") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the drain command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	r = <-done
	if r.ExitCode != cli.ExitIncomplete || r.Phase != PhasePending {
		t.Fatalf("interrupted drain: %+v", r)
	}
	h.exec.block = false
	r = h.step(t, "canary-a", "pool-gpu-a-1-38-drain")
	if r.ExitCode != 0 || r.Attempt != 2 {
		t.Fatalf("resumed drain: %+v", r)
	}
	var ids []string
	for _, c := range h.exec.commands() {
		if !strings.HasPrefix(c, BinGangDrain+" run") {
			continue
		}
		f := strings.Fields(c)
		for i := range f[:len(f)-1] {
			if f[i] == "--run-id" {
				ids = append(ids, f[i+1])
			}
		}
	}
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] == "" {
		t.Errorf("gang-drain run ids %v: a resumed drain names the same run", ids)
	}
}

func writeFile(p, s string) error {
	return osWriteFile(filepath.Clean(p), []byte(s))
}

var _ runtime.Object = (*corev1.Node)(nil)
