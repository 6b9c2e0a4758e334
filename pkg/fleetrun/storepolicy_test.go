package fleetrun

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// recordingStore notes every key written through it.
type recordingStore struct {
	Store
	mu      sync.Mutex
	written []string
}

func (s *recordingStore) note(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.written, key) {
		s.written = append(s.written, key)
	}
}

func (s *recordingStore) Write(ctx context.Context, key string, data []byte) error {
	s.note(key)
	return s.Store.Write(ctx, key, data)
}

func (s *recordingStore) Create(ctx context.Context, key string, data []byte) error {
	s.note(key)
	return s.Store.Create(ctx, key, data)
}

func (s *recordingStore) Update(ctx context.Context, key string, data []byte, version string) (string, error) {
	s.note(key)
	return s.Store.Update(ctx, key, data, version)
}

func (s *recordingStore) Delete(ctx context.Context, key string) error {
	s.note(key)
	return s.Store.Delete(ctx, key)
}

// s3Policy is the part of an IAM policy the test weighs.
type s3Policy struct {
	Statement []struct {
		Effect   string
		Action   []string
		Resource []string
	}
}

// iamMatch matches an object ARN against a policy's Resource pattern as
// IAM does: "*" spans any characters, "/" included, and "?" is one
// character (AWS IAM User Guide, "IAM JSON policy elements: Resource",
// read 2026-12-07).
func iamMatch(pattern, arn string) bool {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()).MatchString(arn)
}

// allows says whether the policy lets action on key: some Allow matches
// and no Deny does (an explicit Deny wins).
func (p s3Policy) allows(action, key string) bool {
	arn := "arn:aws:s3:::BUCKET/PREFIX/" + key
	allowed := false
	for _, st := range p.Statement {
		if !slices.Contains(st.Action, action) {
			continue
		}
		for _, r := range st.Resource {
			if iamMatch(r, arn) {
				if st.Effect == "Deny" {
					return false
				}
				allowed = true
			}
		}
	}
	return allowed
}

func loadPolicy(t *testing.T, name string) s3Policy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "store", name))
	if err != nil {
		t.Fatal(err)
	}
	var p s3Policy
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// TestStepPodsPolicyCoversWhatStepsWrite: every key the step pods' commands
// write in a run (a cluster's steps, a failed step's halt, a gate's
// admission lock, the ring gate's report, the Workflow's end) is one
// deploy/store/step-pods-s3-policy.json lets them write, and neither a
// person's decision nor the frozen plan is; the approvers' policy lets
// people write their decisions and nothing a step writes.
func TestStepPodsPolicyCoversWhatStepsWrite(t *testing.T) {
	steps, people := loadPolicy(t, "step-pods-s3-policy.json"), loadPolicy(t, "approvers-s3-policy.json")
	h := newHarness(t, nil)
	rec := &recordingStore{Store: h.p.Store}
	h.p.Store = rec
	ctx := context.Background()
	h.runCluster(t, "canary-a")
	h.exec.codes[BinPDBBlockers+" -l"] = 1
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers"} {
		h.step(t, "canary-b", s)
	}
	g, err := h.p.GateRing(ctx, "canary")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.p.RecordRingGate(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.RecordEnd(ctx, "gpu-prod-r1", "Failed"); err != nil {
		t.Fatal(err)
	}
	written := slices.Clone(rec.written)
	for _, want := range []string{"/state/", "/evidence/", "/halts/", "/gates/", "/ends/", "runs/r1/lock", "runs/r1/index.json", "latest/"} {
		if !slices.ContainsFunc(written, func(k string) bool { return strings.Contains(k, want) }) {
			t.Errorf("the run wrote no key with %q (written: %v): the test does not cover it", want, written)
		}
	}
	for _, k := range written {
		if !steps.allows("s3:PutObject", k) {
			t.Errorf("a step writes %s, which the step pods' policy does not allow", k)
		}
		if people.allows("s3:PutObject", k) {
			t.Errorf("the approvers' policy lets people write %s, which steps write", k)
		}
	}
	d, err := RecordDecision(ctx, rec, Decision{Run: "r1", Decision: DecisionApprove, Ring: "canary", Identity: &cli.Identity{User: "alice"}, At: h.clock.Add(time.Minute), Reason: "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{d.Key, PlanKey("r1")} {
		if steps.allows("s3:PutObject", k) || steps.allows("s3:DeleteObject", k) {
			t.Errorf("the step pods' policy lets them write %s", k)
		}
	}
	if !people.allows("s3:PutObject", d.Key) {
		t.Errorf("the approvers' policy does not let them record %s", d.Key)
	}
	if !steps.allows("s3:GetObject", d.Key) || !steps.allows("s3:GetObject", PlanKey("r1")) {
		t.Error("the step pods cannot read the decisions or the plan")
	}
}
