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
)

// Decision kinds.
const (
	DecisionApprove = "approve"
	DecisionHalt    = "halt"
)

// Decision is a person's (or a gate's) decision on a run, kept under
// runs/<run>/decisions/ and never changed: who, when, why, and what it
// covers. A halt covers the whole run, a ring or a cluster; an approval of
// a ring counts towards the ring's approvers and lifts a halt of it; an
// approval of a cluster's step completes a manual step.
type Decision struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Run        string    `json:"run"`
	Decision   string    `json:"decision"`
	Ring       string    `json:"ring,omitempty"`
	Cluster    string    `json:"cluster,omitempty"`
	Step       string    `json:"step,omitempty"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	Reason     string    `json:"reason,omitempty"`
	// Key is where it is stored (not stored itself).
	Key string `json:"-"`
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

// RecordDecision stores a decision under a fresh key (time-ordered).
func RecordDecision(ctx context.Context, st Store, d Decision) (Decision, error) {
	d.APIVersion, d.Kind = APIVersion, KindDecision
	d.At = d.At.UTC()
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	d.Key = runKey(d.Run, "decisions", d.At.Format("20060102T150405.000000000Z")+"-"+d.Decision+"-"+hex.EncodeToString(rnd[:])+".json")
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return d, err
	}
	return d, st.Create(ctx, d.Key, append(b, '\n'))
}

// ReadDecisions reads a run's decisions, oldest first.
func ReadDecisions(ctx context.Context, st Store, run string) ([]Decision, error) {
	keys, err := st.List(ctx, runKey(run, "decisions")+"/")
	if err != nil {
		return nil, err
	}
	var out []Decision
	for _, k := range keys {
		b, err := st.Read(ctx, k)
		if err != nil {
			return nil, err
		}
		var d Decision
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("decision %s is not readable: %w", k, err)
		}
		d.Key = k
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// covers reports whether a decision about (ring, cluster) applies to a
// step of cluster c in ring r: a run-wide one covers everything, a ring's
// its clusters.
func covers(d Decision, ring, cluster string) bool {
	if d.Step != "" {
		return false
	}
	switch {
	case d.Cluster != "":
		return d.Cluster == cluster
	case d.Ring != "":
		return d.Ring == ring
	}
	return true
}

// lifts reports whether approval a lifts halt h: an approval of the same
// or a wider scope, made after it.
func lifts(a, h Decision) bool {
	if a.Decision != DecisionApprove || !a.At.After(h.At) || a.Step != "" {
		return false
	}
	switch {
	case a.Cluster != "":
		return h.Cluster == a.Cluster
	case a.Ring != "":
		return h.Ring == a.Ring || (h.Cluster != "" && h.Ring == a.Ring)
	}
	return true
}

// ActiveHalt returns the halt that holds cluster c of ring r now, if any.
func ActiveHalt(ds []Decision, ring, cluster string) (Decision, bool) {
	for i := len(ds) - 1; i >= 0; i-- {
		h := ds[i]
		if h.Decision != DecisionHalt || !covers(h, ring, cluster) {
			continue
		}
		lifted := false
		for _, a := range ds[i+1:] {
			if lifts(a, h) {
				lifted = true
				break
			}
		}
		if !lifted {
			return h, true
		}
	}
	return Decision{}, false
}

// Approvers returns the distinct people who approved a ring.
func Approvers(ds []Decision, ring string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range ds {
		if d.Decision == DecisionApprove && d.Ring == ring && d.Cluster == "" && d.Step == "" && !seen[d.By] {
			seen[d.By] = true
			out = append(out, d.By)
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
