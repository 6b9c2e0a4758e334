package fleetrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Decision kinds.
const (
	DecisionApprove = "approve"
	DecisionHalt    = "halt"
	// DecisionSkip takes a cluster out of a run (the anchor is az fleet
	// updaterun skip, which "sets targets to be skipped within an
	// UpdateRun": members, groups, stages or after-stage waits,
	// https://learn.microsoft.com/cli/azure/fleet/updaterun, read
	// 2026-12-06): once the ring's approver count of distinct people
	// asked for it, its remaining steps do nothing and the gates treat it
	// as decided. It does not count against the failure budget.
	DecisionSkip = "skip"
)

// Decision is a person's decision on a run, kept under
// runs/<run>/decisions/, or a halt a step decided (past a ring's failure
// budget), kept under runs/<run>/halts/; never changed: who, when, why,
// and what it covers. A halt covers the whole run, a ring or a cluster; an
// approval of a ring counts towards the ring's approvers and lifts a halt
// of it; an approval of a cluster's step completes a manual step.
//
// A person's decision carries the identity the management cluster gave
// its command (SelfSubjectReview), and By is that identity's user name.
// Decisions recorded before identities were kept have none: their By,
// then free text, stands for the person.
type Decision struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Run        string `json:"run"`
	Decision   string `json:"decision"`
	Ring       string `json:"ring,omitempty"`
	Cluster    string `json:"cluster,omitempty"`
	Step       string `json:"step,omitempty"`
	By         string `json:"by"`
	// Identity is who the management cluster authenticated; absent on a
	// step's halt and on decisions recorded before it was kept.
	Identity *cli.Identity `json:"identity,omitempty"`
	At       time.Time     `json:"at"`
	Reason   string        `json:"reason,omitempty"`
	// Key is where it is stored (not stored itself).
	Key string `json:"-"`
}

// Who is the person a decision counts for in the rules of distinct
// people: the authenticated user name, else (an older record) By.
func (d Decision) Who() string {
	if d.Identity != nil && d.Identity.User != "" {
		return d.Identity.User
	}
	return d.By
}

// Scope names what a decision covers, for messages.
func (d Decision) Scope() string {
	switch {
	case d.Step != "":
		return "step " + d.Step + " of cluster " + d.Cluster
	case d.Cluster != "":
		return "cluster " + d.Cluster
	case d.Ring != "":
		return "ring " + d.Ring
	}
	return "run " + d.Run
}

// RecordDecision stores a person's decision under a fresh key
// (time-ordered) in runs/<run>/decisions/.
func RecordDecision(ctx context.Context, st Store, d Decision) (Decision, error) {
	return recordDecision(ctx, st, d, decisionsDir)
}

// RecordStepHalt stores a halt a step decided under runs/<run>/halts/, so
// that the step pods' store credentials need no write access to
// decisions/, where people's approvals are.
func RecordStepHalt(ctx context.Context, st Store, d Decision) (Decision, error) {
	if d.Decision != DecisionHalt {
		return d, fmt.Errorf("a step records halts only, not %s", d.Decision)
	}
	d.Identity = nil
	return recordDecision(ctx, st, d, haltsDir)
}

// The prefixes of a run's decisions: people's under decisions/, steps'
// halts under halts/.
const (
	decisionsDir = "decisions"
	haltsDir     = "halts"
)

func recordDecision(ctx context.Context, st Store, d Decision, dir string) (Decision, error) {
	d.APIVersion, d.Kind = APIVersion, KindDecision
	d.At = d.At.UTC()
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	d.Key = runKey(d.Run, dir, d.At.Format("20060102T150405.000000000Z")+"-"+d.Decision+"-"+hex.EncodeToString(rnd[:])+".json")
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return d, err
	}
	return d, st.Create(ctx, d.Key, append(b, '\n'))
}

// ReadDecisions reads a run's decisions, people's and steps' halts, oldest
// first. A record under halts/ counts as a halt only: one that is anything
// else is refused (the step pods can write there, people's decisions
// cannot come from there), and its identity is dropped.
func ReadDecisions(ctx context.Context, st Store, run string) ([]Decision, error) {
	out, err := readRecords(ctx, st, runKey(run, decisionsDir)+"/", "decision", func(d *Decision, k string) { d.Key = k })
	if err != nil {
		return nil, err
	}
	halts, err := readRecords(ctx, st, runKey(run, haltsDir)+"/", "halt", func(d *Decision, k string) { d.Key = k })
	if err != nil {
		return nil, err
	}
	for _, h := range halts {
		if h.Decision != DecisionHalt {
			return nil, fmt.Errorf("%s is a %q, not a halt: only halts are kept under %s/; remove it", h.Key, h.Decision, runKey(run, haltsDir))
		}
		h.Identity = nil
		out = append(out, h)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// readRecords reads every JSON record under prefix, in key order, giving
// each its key.
func readRecords[T any](ctx context.Context, st Store, prefix, what string, setKey func(*T, string)) ([]T, error) {
	keys, err := st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, k := range keys {
		b, err := st.Read(ctx, k)
		if err != nil {
			return nil, err
		}
		var r T
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s %s is not readable: %w", what, k, err)
		}
		setKey(&r, k)
		out = append(out, r)
	}
	return out, nil
}

// covers reports whether a halt covers a step of cluster c in ring r: a
// run-wide halt covers everything, a ring's its clusters and every later
// ring's (a later ring never overtakes a halted one), a cluster's that
// cluster.
func (p *Plan) covers(h Decision, ring, cluster string) bool {
	if h.Step != "" {
		return false
	}
	switch {
	case h.Cluster != "":
		return h.Cluster == cluster
	case h.Ring != "":
		return h.Ring == ring || (ring != "" && p.ringIndex(h.Ring) >= 0 && p.ringIndex(h.Ring) < p.ringIndex(ring))
	}
	return true
}

func (p *Plan) ringIndex(name string) int {
	for i, r := range p.Rings {
		if r.Name == name {
			return i
		}
	}
	return -1
}

// Lifters is how many distinct people must approve to lift a halt (or
// skip a cluster) of this scope: the ring's approver count (at least one);
// a run-wide halt takes the most any ring needs.
func (p *Plan) Lifters(ring string) int {
	n := 1
	for _, r := range p.Rings {
		if ring == "" || r.Name == ring {
			n = max(n, r.Approvers)
		}
	}
	return n
}

// lifters are the distinct people whose approvals after halt h lift it:
// approvals of the same or a wider scope, made after it.
func liftersOf(ds []Decision, h Decision) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range ds {
		if a.Decision != DecisionApprove || !a.At.After(h.At) || a.Step != "" {
			continue
		}
		ok := false
		switch {
		case a.Cluster != "":
			ok = h.Cluster == a.Cluster
		case a.Ring != "":
			ok = h.Ring == a.Ring
		default:
			ok = true
		}
		if ok && !seen[a.Who()] {
			seen[a.Who()] = true
			out = append(out, a.Who())
		}
	}
	return out
}

// ActiveHalt returns the halt that holds cluster c of ring r now, if any:
// a halt of its cluster, its ring or an earlier ring, or the run, that
// fewer distinct people than its ring's approver count approved since.
func (p *Plan) ActiveHalt(ds []Decision, ring, cluster string) (Decision, bool) {
	for i := len(ds) - 1; i >= 0; i-- {
		h := ds[i]
		if h.Decision != DecisionHalt || !p.covers(h, ring, cluster) {
			continue
		}
		if len(liftersOf(ds[i+1:], h)) < p.Lifters(h.Ring) {
			return h, true
		}
	}
	return Decision{}, false
}

// LiftCommand is the approval that lifts the halt holding the cluster now:
// of the halt's own scope (its cluster, its ring, which may be an earlier
// ring than the cluster's, or the run), by as many distinct people as its
// ring's approver count. Without a halt it names the cluster's ring.
func (p *Plan) LiftCommand(ds []Decision, cluster string) string {
	ring := ""
	if c, ok := p.Cluster(cluster); ok {
		ring = c.Ring
	}
	h, ok := p.ActiveHalt(ds, ring, cluster)
	if !ok {
		h = Decision{Ring: ring}
	}
	scope := ""
	switch {
	case h.Cluster != "":
		scope = " --cluster " + h.Cluster
	case h.Ring != "":
		scope = " --ring " + h.Ring
	}
	cmd := "kubectl skew fleet approve --run " + p.Run + scope + " --reason ..."
	if n := p.Lifters(h.Ring); n > 1 {
		cmd += fmt.Sprintf(" (by %d distinct people)", n)
	}
	return cmd
}

// Skippers are the distinct people who asked to skip a cluster.
func Skippers(ds []Decision, cluster string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range ds {
		if d.Decision == DecisionSkip && d.Cluster == cluster && !seen[d.Who()] {
			seen[d.Who()] = true
			out = append(out, d.Who())
		}
	}
	return out
}

// Skipped reports whether enough people skipped the cluster (its ring's
// approver count), and who.
func (p *Plan) Skipped(ds []Decision, cluster string) ([]string, bool) {
	c, ok := p.Cluster(cluster)
	if !ok {
		return nil, false
	}
	who := Skippers(ds, cluster)
	return who, len(who) >= p.Lifters(c.Ring)
}

// SkippedAt is when enough people had skipped the cluster (the decision
// that made the count), and whether they have.
func (p *Plan) SkippedAt(ds []Decision, cluster string) (time.Time, bool) {
	c, ok := p.Cluster(cluster)
	if !ok {
		return time.Time{}, false
	}
	need := p.Lifters(c.Ring)
	seen := map[string]bool{}
	for _, d := range ds {
		if d.Decision != DecisionSkip || d.Cluster != cluster || seen[d.Who()] {
			continue
		}
		seen[d.Who()] = true
		if len(seen) >= need {
			return d.At, true
		}
	}
	return time.Time{}, false
}

// ApplySkips marks every cluster that enough people skipped, and that has
// neither finished nor left, as having left the run (skipped) when the
// skip was agreed: gates, admissions and the status count it as decided
// from then, before its next step records it (a run by hand may never run
// one).
func (p *Plan) ApplySkips(ds []Decision, states map[string]*ClusterState) {
	for name, s := range states {
		if s == nil || s.FinishedAt != nil || s.LeftAt != nil {
			continue
		}
		if at, ok := p.SkippedAt(ds, name); ok {
			s.LeftAt, s.Outcome = &at, OutcomeSkipped
		}
	}
}

// Approvers returns the distinct people who approved a ring.
func Approvers(ds []Decision, ring string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range ds {
		if d.Decision == DecisionApprove && d.Ring == ring && d.Cluster == "" && d.Step == "" && !seen[d.Who()] {
			seen[d.Who()] = true
			out = append(out, d.Who())
		}
	}
	return out
}

// StepApproved returns the approval that completes a manual step.
func StepApproved(ds []Decision, cluster, step string) (Decision, bool) {
	for _, d := range ds {
		if d.Decision == DecisionApprove && d.Cluster == cluster && d.Step == step {
			return d, true
		}
	}
	return Decision{}, false
}

// describeHalt is the one line a halted step prints.
func describeHalt(h Decision) string {
	s := fmt.Sprintf("%s is halted by %s at %s", h.Scope(), h.By, h.At.Format(time.RFC3339))
	if r := strings.TrimSpace(h.Reason); r != "" {
		s += ": " + r
	}
	return s
}
