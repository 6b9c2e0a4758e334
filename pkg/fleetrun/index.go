package fleetrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// KindIndex is a run's index.
const KindIndex = "FleetRunIndex"

// IndexKey is where a run's index lives: one small object that says, for
// each cluster, what the gates weigh (its ring, whether it is admitted,
// finished, left or failed, and when), so a gate reads it instead of
// every cluster's state file.
func IndexKey(run string) string { return runKey(run, "index.json") }

// RunIndex is runs/<run>/index.json.
type RunIndex struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Run        string                 `json:"run"`
	Clusters   map[string]*IndexEntry `json:"clusters"`
}

// IndexEntry is one cluster's summary in the index.
//
// It is trusted only while Pending is empty. A write of the cluster's
// state that changes its summary first sets Pending to a token of its own
// (a compare-and-swap of the index), then writes the state, then writes
// the new summary and clears Pending, again by compare-and-swap and only
// while Pending still holds its token. A writer that dies, or whose state
// write fails, between the two leaves the entry pending, and a reader of a
// pending entry reads the cluster's state file instead: the index can lag
// a state, never lie about one. An entry cleared by one writer after
// another set its own token stays pending until a later change clears it.
type IndexEntry struct {
	Ring       string     `json:"ring,omitempty"`
	AdmittedAt *time.Time `json:"admittedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	LeftAt     *time.Time `json:"leftAt,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	GPUs       int        `json:"gpus,omitempty"`
	// Failed is the cluster's failed step, when one is.
	Failed  string `json:"failed,omitempty"`
	Pending string `json:"pending,omitempty"`
}

// summaryOf is the index entry a state makes.
func summaryOf(s *ClusterState) IndexEntry {
	failed, _ := s.Failed()
	return IndexEntry{Ring: s.Ring, AdmittedAt: s.AdmittedAt, FinishedAt: s.FinishedAt, LeftAt: s.LeftAt, Outcome: s.Outcome, GPUs: s.GPUs, Failed: failed}
}

func sameTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

func (e IndexEntry) same(o IndexEntry) bool {
	return e.Ring == o.Ring && sameTime(e.AdmittedAt, o.AdmittedAt) && sameTime(e.FinishedAt, o.FinishedAt) && sameTime(e.LeftAt, o.LeftAt) &&
		e.Outcome == o.Outcome && e.GPUs == o.GPUs && e.Failed == o.Failed
}

// state is the skeleton state an entry stands for: what the gates read,
// and no steps but the failed one. It is never written (WriteState
// refuses it).
func (e IndexEntry) state(run, cluster, ring string) *ClusterState {
	s := &ClusterState{APIVersion: APIVersion, Kind: KindState, Run: run, Cluster: cluster, Ring: ring,
		AdmittedAt: e.AdmittedAt, FinishedAt: e.FinishedAt, LeftAt: e.LeftAt, Outcome: e.Outcome, GPUs: e.GPUs, summary: true}
	if e.Ring != "" {
		s.Ring = e.Ring
	}
	if e.Failed != "" {
		s.Steps = []StepState{{Name: e.Failed, Phase: PhaseFailed}}
	}
	return s
}

// CreateIndex writes a new run's index, every cluster of the plan with
// no state yet; an index already there is kept (a plan frozen again, or
// replaced, leaves the states and so the index as they are; a cluster the
// index does not name is read from its state file).
func CreateIndex(ctx context.Context, st Store, p *Plan) error {
	idx := RunIndex{APIVersion: APIVersion, Kind: KindIndex, Run: p.Run, Clusters: map[string]*IndexEntry{}}
	for _, c := range p.Clusters {
		idx.Clusters[c.Name] = &IndexEntry{Ring: c.Ring}
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	if _, err := st.Update(ctx, IndexKey(p.Run), append(b, '\n'), ""); err != nil && !errors.Is(err, ErrConflict) {
		return err
	}
	return nil
}

// readIndex reads a run's index; ok is false when the run has none (a run
// planned before the index existed).
func readIndex(ctx context.Context, st Store, run string) (*RunIndex, string, bool, error) {
	b, v, err := st.ReadVersion(ctx, IndexKey(run))
	if errors.Is(err, ErrNotFound) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, err
	}
	var idx RunIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, "", false, fmt.Errorf("the index of run %s is not readable: %w", run, err)
	}
	if idx.Clusters == nil {
		idx.Clusters = map[string]*IndexEntry{}
	}
	return &idx, v, true, nil
}

// errNoIndex is a run without an index: nothing to keep.
var errNoIndex = errors.New("the run has no index")

// editIndex changes one cluster's entry by compare-and-swap, reading and
// trying again while other writers win; f returns false to leave the
// index as it is.
func editIndex(ctx context.Context, st Store, run, cluster string, f func(e *IndexEntry) bool) error {
	return retryStore(ctx, storeBackoff, func(err error) bool { return errors.Is(err, ErrConflict) || Transient(err) }, func() error {
		idx, v, ok, err := readIndex(ctx, st, run)
		if err != nil {
			return err
		}
		if !ok {
			return errNoIndex
		}
		e := idx.Clusters[cluster]
		if e == nil {
			e = &IndexEntry{}
			idx.Clusters[cluster] = e
		}
		if !f(e) {
			return nil
		}
		b, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return err
		}
		_, err = st.Update(ctx, IndexKey(run), append(b, '\n'), v)
		return err
	})
}

func newToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// indexBefore marks the cluster's entry pending before a state write that
// changes its summary, and returns the token to clear it with ("" when the
// run has no index: nothing to clear).
func indexBefore(ctx context.Context, st Store, s *ClusterState) (string, error) {
	token := newToken()
	err := editIndex(ctx, st, s.Run, s.Cluster, func(e *IndexEntry) bool { e.Pending = token; return true })
	if errors.Is(err, errNoIndex) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("marking cluster %s in the index of run %s before its state changes: %w", s.Cluster, s.Run, err)
	}
	return token, nil
}

// indexAfter writes the summary of a state that landed and clears the
// entry, while it still holds token. A failure leaves it pending, which
// readers handle by reading the state file.
func indexAfter(ctx context.Context, st Store, s *ClusterState, token string) {
	if token == "" {
		return
	}
	sum := summaryOf(s)
	_ = editIndex(ctx, st, s.Run, s.Cluster, func(e *IndexEntry) bool {
		if e.Pending != token {
			return false
		}
		*e = sum
		return true
	})
}

// readGateStates reads what the gates weigh of every cluster of the run:
// the index, and the state file of each cluster the index does not vouch
// for (not in it, or pending) or that full names. Without an index (a run
// planned before it) every state file is read.
func readGateStates(ctx context.Context, st Store, p *Plan, full func(cluster string) bool) (map[string]*ClusterState, error) {
	idx, _, ok, err := readIndex(ctx, st, p.Run)
	if err != nil {
		return nil, err
	}
	if !ok {
		return ReadStates(ctx, st, p)
	}
	out := map[string]*ClusterState{}
	for _, c := range p.Clusters {
		if e := idx.Clusters[c.Name]; e != nil && e.Pending == "" && (full == nil || !full(c.Name)) {
			out[c.Name] = e.state(p.Run, c.Name, c.Ring)
			continue
		}
		s, err := ReadState(ctx, st, p.Run, c.Name, c.Ring)
		if err != nil {
			return nil, err
		}
		out[c.Name] = s
	}
	return out, nil
}
