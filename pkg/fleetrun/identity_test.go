package fleetrun

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestDistinctPeopleAreIdentities: the two-person rule counts the users
// the management cluster authenticated, not the By text; one person
// approving twice is one approver, whatever the records say beside it.
func TestDistinctPeopleAreIdentities(t *testing.T) {
	at := monday0930
	approve := func(by, user string) Decision {
		at = at.Add(time.Minute)
		d := Decision{Decision: DecisionApprove, Ring: "prod", By: by, At: at}
		if user != "" {
			d.Identity = &cli.Identity{User: user, Groups: []string{"system:authenticated"}}
		}
		return d
	}
	ds := []Decision{approve("alice", "alice"), approve("bob", "alice")}
	if got := Approvers(ds, "prod"); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("alice twice, once with another By: approvers %v, want [alice]", got)
	}
	ds = append(ds, approve("bob", "bob"))
	if got := Approvers(ds, "prod"); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("approvers %v, want [alice bob]", got)
	}
	// A record from before identities were kept counts by its By.
	ds = append(ds, approve("carol", ""))
	if got := Approvers(ds, "prod"); !slices.Equal(got, []string{"alice", "bob", "carol"}) {
		t.Errorf("approvers %v, want [alice bob carol]", got)
	}
	// Halts lift and skips count the same way.
	halt := Decision{Decision: DecisionHalt, Ring: "prod", By: "step x of y", At: monday0930}
	if got := liftersOf(ds, halt); !slices.Equal(got, []string{"alice", "bob", "carol"}) {
		t.Errorf("lifters %v", got)
	}
	skips := []Decision{
		{Decision: DecisionSkip, Cluster: "prod-use1", By: "alice", Identity: &cli.Identity{User: "alice"}, At: at},
		{Decision: DecisionSkip, Cluster: "prod-use1", By: "someone else", Identity: &cli.Identity{User: "alice"}, At: at.Add(time.Minute)},
	}
	if got := Skippers(skips, "prod-use1"); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("skippers %v, want [alice]", got)
	}
}

// TestDecideNeedsIdentity: a person's decision without the identity the
// cluster gave is refused (exit 2) and nothing is written; with one, By is
// its user name, whatever the caller put there.
func TestDecideNeedsIdentity(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	_, err := h.p.Decide(ctx, Decision{Run: "r1", Decision: DecisionApprove, Ring: "prod", By: "alice", At: h.clock, Reason: "ok"}, DecideOptions{})
	if cli.ExitCode(err) != cli.ExitUsage {
		t.Errorf("no identity: %v, want exit 2", err)
	}
	if ds, _ := ReadDecisions(ctx, h.p.Store, "r1"); len(ds) != 0 {
		t.Errorf("recorded without an identity: %+v", ds)
	}
	res, err := h.p.Decide(ctx, Decision{Run: "r1", Decision: DecisionApprove, Ring: "prod", By: "typed name", Identity: &cli.Identity{User: "alice", UID: "u-1"}, At: h.clock, Reason: "ok"}, DecideOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.p.Store.Read(ctx, res.Decision.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Decision.Key, "runs/r1/decisions/") || !strings.Contains(string(b), `"by": "alice"`) ||
		!strings.Contains(string(b), `"identity": {`) || !strings.Contains(string(b), `"uid": "u-1"`) {
		t.Errorf("recorded at %s:\n%s", res.Decision.Key, b)
	}
}

// TestOldDecisionsLoad: a decision file written before identities were
// kept (no identity field) loads, and counts by its By.
func TestOldDecisionsLoad(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	old := `{
  "apiVersion": "gpufleet.dev/v1alpha1",
  "kind": "FleetDecision",
  "run": "r1",
  "decision": "approve",
  "ring": "prod",
  "by": "alice (CHG-1)",
  "at": "2026-11-30T09:31:00Z",
  "reason": "canary soaked clean"
}
`
	if err := h.p.Store.Create(ctx, "runs/r1/decisions/20261130T093100.000000000Z-approve-0a0b0c.json", []byte(old)); err != nil {
		t.Fatal(err)
	}
	ds, err := ReadDecisions(ctx, h.p.Store, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Identity != nil || ds[0].Who() != "alice (CHG-1)" {
		t.Fatalf("old decision read as %+v", ds)
	}
	if got := Approvers(ds, "prod"); !slices.Equal(got, []string{"alice (CHG-1)"}) {
		t.Errorf("approvers %v", got)
	}
}

// TestStepHaltsKeptApart: a step's halt is kept under the run's halts/
// and read with people's decisions in time order; anything but a halt
// there is refused, so credentials that can write halts/ cannot approve.
func TestStepHaltsKeptApart(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if _, err := RecordStepHalt(ctx, h.p.Store, Decision{Run: "r1", Decision: DecisionApprove, Ring: "prod", By: "step", At: h.clock}); err == nil {
		t.Error("a step recorded an approval")
	}
	halt, err := RecordStepHalt(ctx, h.p.Store, Decision{Run: "r1", Decision: DecisionHalt, Ring: "prod", By: "step gate of prod-use1",
		Identity: &cli.Identity{User: "alice"}, At: h.clock.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(halt.Key, "runs/r1/halts/") {
		t.Errorf("a step's halt at %s", halt.Key)
	}
	h.decide(t, Decision{Decision: DecisionApprove, Ring: "prod", By: "alice", At: h.clock})
	h.decide(t, Decision{Decision: DecisionApprove, Ring: "prod", By: "bob", At: h.clock.Add(2 * time.Minute)})
	ds, err := ReadDecisions(ctx, h.p.Store, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, d := range ds {
		order = append(order, d.Decision+" "+d.Who())
	}
	if want := []string{"approve alice", "halt step gate of prod-use1", "approve bob"}; !slices.Equal(order, want) {
		t.Errorf("decisions %v, want %v", order, want)
	}
	if ds[1].Identity != nil {
		t.Errorf("a halt under halts/ keeps an identity: %+v", ds[1].Identity)
	}
	forged := `{"apiVersion": "gpufleet.dev/v1alpha1", "kind": "FleetDecision", "run": "r1", "decision": "approve", "ring": "prod", "by": "mallory", "at": "2026-11-30T10:00:00Z"}`
	if err := h.p.Store.Create(ctx, "runs/r1/halts/20261130T100000.000000000Z-approve-0d0e0f.json", []byte(forged)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDecisions(ctx, h.p.Store, "r1"); err == nil || !strings.Contains(err.Error(), "not a halt") {
		t.Errorf("an approval under halts/ was read: %v", err)
	}
}
