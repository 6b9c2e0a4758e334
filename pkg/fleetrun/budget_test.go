package fleetrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

func (h *harness) decide(t *testing.T, d Decision) *DecideResult {
	t.Helper()
	d.Run = "r1"
	if d.At.IsZero() {
		h.clock = h.clock.Add(time.Second)
		d.At = h.clock
	}
	if d.Reason == "" {
		d.Reason = "test"
	}
	if d.Identity == nil {
		d.Identity = &cli.Identity{User: d.By}
	}
	res, err := h.p.Decide(context.Background(), d, DecideOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (h *harness) halts(t *testing.T) int {
	t.Helper()
	ds, err := ReadDecisions(context.Background(), h.p.Store, "r1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range ds {
		if d.Decision == DecisionHalt {
			n++
		}
	}
	return n
}

// TestFailureBudget: with a budget of one, the first failed cluster leaves
// the run with a record (exit 5), frees its place and its batch goes on;
// the second is past the budget and halts the ring, once; a step refused
// by that halt is not a failure and writes no second halt.
func TestFailureBudget(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[0].MaxFailures = 1 })
	h.step(t, "canary-a", "gate")
	h.step(t, "canary-a", "preflight-1-38")
	h.exec.codes[BinPDBBlockers+" -l"] = 1
	r := h.step(t, "canary-a", "pool-gpu-a-1-38-pdb-blockers")
	if r.ExitCode != ExitLeftRun || !strings.Contains(r.Message, "leaves the run: 1 failed in ring canary (canary-a), within its failure budget of 1") {
		t.Fatalf("first failure: %+v", r)
	}
	if st := h.state(t, "canary-a"); st.LeftAt == nil || st.Outcome != OutcomeFailed || st.InFlight() {
		t.Errorf("state after leaving: %+v", st)
	}
	if h.halts(t) != 0 {
		t.Error("a failure within the budget halted the ring")
	}
	// Its other steps do nothing.
	n := len(h.exec.calls)
	if r := h.step(t, "canary-a", "pool-gpu-a-1-38-drain"); r.ExitCode != 0 || r.Skipped == "" {
		t.Errorf("step of a cluster that left: %+v", r)
	}
	if len(h.exec.calls) != n {
		t.Error("a cluster that left the run ran a command")
	}
	// The batch goes on: canary-b starts, and fails too: past the budget.
	h.step(t, "canary-b", "gate")
	h.step(t, "canary-b", "preflight-1-38")
	r = h.step(t, "canary-b", "pool-gpu-a-1-38-pdb-blockers")
	if r.ExitCode != cli.ExitFindings || !strings.Contains(r.Message, "2 failed in ring canary (canary-a, canary-b), past its failure budget of 1: ring canary halts") {
		t.Fatalf("second failure: %+v", r)
	}
	if h.halts(t) != 1 {
		t.Fatalf("%d halts, want 1", h.halts(t))
	}
	// Refused by the halt: exit 1, the gate not failed, no second halt.
	r = h.step(t, "canary-c", "gate")
	if r.ExitCode != cli.ExitFindings || !strings.Contains(r.Message, "nothing started") {
		t.Fatalf("gate under the halt: %+v", r)
	}
	if g := h.state(t, "canary-c").Step("gate"); g.Phase != PhasePending || g.Attempt != 0 {
		t.Errorf("refused gate recorded as %+v", g)
	}
	if h.halts(t) != 1 {
		t.Errorf("%d halts after a refused step, want 1", h.halts(t))
	}
}

// TestHaltsAcrossRingsAndTwoApprovers: a halt of an earlier ring holds
// later rings too; lifting a halt of a ring that needs two approvers takes
// two distinct people.
func TestHaltsAcrossRingsAndTwoApprovers(t *testing.T) {
	h := newHarness(t, nil)
	h.decide(t, Decision{Decision: DecisionHalt, Ring: "canary", By: "oncall"})
	if r := h.step(t, "train-a", "gate"); r.ExitCode != cli.ExitFindings || !strings.Contains(r.Message, "ring canary is halted") {
		t.Errorf("a later ring under an earlier ring's halt: %+v", r)
	}
	h.decide(t, Decision{Decision: DecisionHalt, Ring: "prod", By: "oncall"})
	h.decide(t, Decision{Decision: DecisionApprove, Ring: "prod", By: "alice"})
	res := h.decide(t, Decision{Decision: DecisionApprove, Ring: "prod", By: "alice"})
	if !strings.Contains(res.Approvals, "the halt of ring prod holds: 1 of 2 distinct approvers") {
		t.Errorf("one approver twice: %q", res.Approvals)
	}
	ds, _ := ReadDecisions(context.Background(), h.p.Store, "r1")
	if _, ok := h.p.Plan.ActiveHalt(ds, "prod", "prod-use1"); !ok {
		t.Fatal("one approver lifted a halt of a two-approver ring")
	}
	h.decide(t, Decision{Decision: DecisionApprove, Ring: "prod", By: "bob"})
	ds, _ = ReadDecisions(context.Background(), h.p.Store, "r1")
	if h, ok := h.p.Plan.ActiveHalt(ds, "prod", "prod-use1"); ok && h.Ring == "prod" {
		t.Errorf("two approvers did not lift the halt of prod: %+v", h)
	}
}

// prodUse1InFlight is a run with the canary ring done, prod approved,
// prod-euw1 done and prod-use1 admitted, without caps or windows.
func prodUse1InFlight(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, func(f *fleetfile.Fleet) {
		for i := range f.Spec.Rings {
			f.Spec.Rings[i].MaxConcurrent = 0
		}
		f.Spec.Caps = fleetfile.Caps{}
		f.Spec.Windows = nil
	})
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = h.clock.Add(2 * time.Hour) // the canary ring's soak
	for _, who := range []string{"alice", "bob"} {
		h.decide(t, Decision{Decision: DecisionApprove, Ring: "prod", By: who})
	}
	h.runCluster(t, "prod-euw1")
	h.step(t, "prod-use1", "gate")
	return h
}

// TestSkip: a skip takes effect once the ring's approver count of people
// asked; the cluster's steps then do nothing, it does not count against
// the budget, and the gates of later rings treat it as decided.
func TestSkip(t *testing.T) {
	h := prodUse1InFlight(t)
	res := h.decide(t, Decision{Decision: DecisionSkip, Cluster: "prod-use1", By: "alice", Reason: "hardware RMA"})
	if !strings.Contains(res.Approvals, "1 of 2 people (alice): it stays in the run") {
		t.Errorf("one skip of two: %q", res.Approvals)
	}
	if r := h.step(t, "prod-use1", "preflight-1-38"); r.Skipped != "" {
		t.Fatalf("skipped by one of two: %+v", r)
	}
	res = h.decide(t, Decision{Decision: DecisionSkip, Cluster: "prod-use1", By: "bob", Reason: "agreed"})
	if !strings.Contains(res.Approvals, "2 of 2 people (alice, bob): it leaves the run") {
		t.Errorf("two skips: %q", res.Approvals)
	}
	r := h.step(t, "prod-use1", "pool-gpu-a-1-38-pdb-blockers")
	if r.ExitCode != 0 || !strings.Contains(r.Skipped, "skipped by alice, bob") {
		t.Fatalf("step of a skipped cluster: %+v", r)
	}
	st := h.state(t, "prod-use1")
	if st.Outcome != OutcomeSkipped || st.InFlight() {
		t.Errorf("skipped state %+v", st)
	}
	// The next ring's gate: prod is decided.
	g, err := h.p.PreviewClusterGate(context.Background(), "prod-usw2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Checks {
		if c.Name == "earlier-rings" && c.Result != CheckPass {
			t.Errorf("earlier rings with prod-use1 skipped: %+v", c)
		}
		if c.Name == "failure-budget" && c.Result != CheckPass {
			t.Errorf("a skip counted as a failure: %+v", c)
		}
	}
}

// TestSkipCountsBeforeItsNextStep: a run by hand may never run another
// step of a skipped cluster; the later ring's gate, the budget and the
// status count it as skipped from the decision that made the count.
func TestSkipCountsBeforeItsNextStep(t *testing.T) {
	h := prodUse1InFlight(t)
	h.decide(t, Decision{Decision: DecisionSkip, Cluster: "prod-use1", By: "alice"})
	second := h.decide(t, Decision{Decision: DecisionSkip, Cluster: "prod-use1", By: "bob"})
	g, err := h.p.PreviewClusterGate(context.Background(), "prod-usw2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Checks {
		if c.Name == "earlier-rings" && c.Result != CheckPass {
			t.Errorf("earlier rings with prod-use1 skipped and no step of it run since: %+v", c)
		}
	}
	s, err := ReadStatus(context.Background(), h.p.Store, h.p.Plan, h.clock)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Rings {
		if r.Name == "prod" && (r.Skipped != 1 || r.Failed != 0) {
			t.Errorf("status of ring prod: %+v", r)
		}
	}
	// Its next step records the skip at the decision's time.
	if r := h.step(t, "prod-use1", "preflight-1-38"); r.Skipped == "" {
		t.Fatalf("step of a skipped cluster: %+v", r)
	}
	if st := h.state(t, "prod-use1"); st.LeftAt == nil || !st.LeftAt.Equal(second.Decision.At) {
		t.Errorf("left at %v, want the second skip's %s", st.LeftAt, second.Decision.At)
	}
}

// TestLiftCommand: the hint of a step refused by a halt names the halt's
// own scope (an earlier ring's, a cluster's, the run's) and how many people
// lift it, not the refused cluster's ring.
func TestLiftCommand(t *testing.T) {
	h := newHarness(t, nil)
	p := h.p.Plan
	read := func() []Decision {
		ds, err := ReadDecisions(context.Background(), h.p.Store, "r1")
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	if got, want := p.LiftCommand(read(), "train-a"), "kubectl skew fleet approve --run r1 --ring training --reason ..."; got != want {
		t.Errorf("no halt: %q, want %q", got, want)
	}
	h.decide(t, Decision{Decision: DecisionHalt, Ring: "prod", By: "oncall"})
	if got, want := p.LiftCommand(read(), "train-a"), "kubectl skew fleet approve --run r1 --ring prod --reason ... (by 2 distinct people)"; got != want {
		t.Errorf("a later ring under prod's halt: %q, want %q", got, want)
	}
	h.decide(t, Decision{Decision: DecisionHalt, Cluster: "canary-a", By: "oncall"})
	if got, want := p.LiftCommand(read(), "canary-a"), "kubectl skew fleet approve --run r1 --cluster canary-a --reason ..."; got != want {
		t.Errorf("a cluster's halt: %q, want %q", got, want)
	}
	h.decide(t, Decision{Decision: DecisionHalt, By: "oncall"})
	if got, want := p.LiftCommand(read(), "canary-b"), "kubectl skew fleet approve --run r1 --reason ... (by 2 distinct people)"; got != want {
		t.Errorf("a run-wide halt: %q, want %q", got, want)
	}
}
