package fleetrun

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// countingStore counts the reads and writes that go through it, and can
// fail the index's writes (a runner that dies between a state write and
// the index write).
type countingStore struct {
	Store
	mu     sync.Mutex
	reads  int
	writes map[string]int
	// failIndex makes the writes of the run's index that leave no entry
	// pending fail: the runner dies after its state write, before the
	// index write that follows it.
	failIndex bool
}

func newCountingStore(st Store) *countingStore {
	return &countingStore{Store: st, writes: map[string]int{}}
}

func (s *countingStore) read() {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
}

func (s *countingStore) wrote(key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failIndex && strings.HasSuffix(key, "/index.json") && !strings.Contains(string(data), `"pending"`) {
		return errors.New("killed before the index write")
	}
	s.writes[key]++
	return nil
}

func (s *countingStore) counts() (reads int, writes map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := map[string]int{}
	for k, v := range s.writes {
		w[k] = v
	}
	return s.reads, w
}

func (s *countingStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads, s.writes = 0, map[string]int{}
}

func (s *countingStore) Read(ctx context.Context, key string) ([]byte, error) {
	s.read()
	return s.Store.Read(ctx, key)
}

func (s *countingStore) ReadVersion(ctx context.Context, key string) ([]byte, string, error) {
	s.read()
	return s.Store.ReadVersion(ctx, key)
}

func (s *countingStore) List(ctx context.Context, prefix string) ([]string, error) {
	s.read()
	return s.Store.List(ctx, prefix)
}

func (s *countingStore) Write(ctx context.Context, key string, data []byte) error {
	if err := s.wrote(key, data); err != nil {
		return err
	}
	return s.Store.Write(ctx, key, data)
}

func (s *countingStore) Create(ctx context.Context, key string, data []byte) error {
	if err := s.wrote(key, data); err != nil {
		return err
	}
	return s.Store.Create(ctx, key, data)
}

func (s *countingStore) Update(ctx context.Context, key string, data []byte, version string) (string, error) {
	if err := s.wrote(key, data); err != nil {
		return "", err
	}
	return s.Store.Update(ctx, key, data, version)
}

// evidenceWrites counts the evidence files among writes.
func evidenceWrites(writes map[string]int) int {
	n := 0
	for k, v := range writes {
		if strings.Contains(k, "/evidence/") {
			n += v
		}
	}
	return n
}

// TestWaitingDayWritesAHandful: a cluster held for 24 hours, asked every
// 15 minutes (Argo's retry at the default cap), by a closed window and by
// its ring's cap, starts no attempt and writes no evidence; its step's
// record says once why it waits (and until when, for the window).
// Before the caps were weighed outside an attempt, the ring's cap made 96
// attempts and 192 evidence files a day.
func TestWaitingDayWritesAHandful(t *testing.T) {
	for _, tc := range []struct {
		name, cluster, reason string
		setup                 func(t *testing.T, h *harness) *time.Time
	}{
		{"closed window", "prod-use1", "window", func(t *testing.T, h *harness) *time.Time {
			for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
				h.runCluster(t, c)
			}
			h.clock = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC) // after the soak, the prod window closed
			opens := time.Date(2026, 11, 4, 9, 0, 0, 0, time.UTC)
			return &opens
		}},
		{"ring cap", "canary-c", "caps", func(t *testing.T, h *harness) *time.Time {
			// canary's maxConcurrent is 2: a and b in flight hold c out.
			for _, c := range []string{"canary-a", "canary-b"} {
				if r := h.step(t, c, "gate"); r.ExitCode != 0 {
					t.Fatalf("%s: %+v", c, r)
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No fleet-wide caps: the ring's cap alone holds canary-c.
			h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil; f.Spec.Caps = fleetfile.Caps{} })
			until := tc.setup(t, h)
			cs := newCountingStore(h.p.Store)
			h.p.Store = cs
			start := h.clock
			asks := 0
			for ; h.clock.Before(start.Add(24 * time.Hour)); h.clock = h.clock.Add(15 * time.Minute) {
				if until != nil && !h.clock.Before(*until) {
					break
				}
				r := h.step(t, tc.cluster, "gate")
				asks++
				if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || len(r.Evidence) != 0 {
					t.Fatalf("ask %d at %s: %+v, want not yet and no attempt", asks, h.clock.Format(time.RFC3339), r)
				}
			}
			_, writes := cs.counts()
			st := h.state(t, tc.cluster)
			g := st.Step("gate")
			t.Logf("%d asks: %d evidence files, %d state writes, attempt %d, writes %v", asks, evidenceWrites(writes), writes[StateKey("r1", tc.cluster)], g.Attempt, writes)
			if asks < 60 {
				t.Fatalf("only %d asks: the test proves nothing", asks)
			}
			if n := evidenceWrites(writes); n > 0 || g.Attempt != 0 || len(g.History) != 0 {
				t.Errorf("%d evidence files, attempt %d, history %v: a wait is no attempt", n, g.Attempt, g.History)
			}
			if n := writes[StateKey("r1", tc.cluster)]; n != 1 {
				t.Errorf("%d writes of the state: want one, saying why it waits", n)
			}
			if w := g.Waiting; w == nil || w.Reason != tc.reason || !sameTime(w.Until, until) {
				t.Errorf("waiting %+v: want reason %s until %v", w, tc.reason, until)
			}
		})
	}
}

// gateReads counts the store reads of one cluster's gate step held by the
// earlier rings (no attempt) and of a first cluster's gate that admits it
// (an attempt), in a run of n clusters.
func gateReads(t *testing.T, n int, withIndex bool) (held, admit int) {
	f, in := fleetOf(t, n)
	p := mustPlan(t, f, in, monday0930)
	p.Run = "r1"
	h := harnessFor(t, p)
	ctx := context.Background()
	if !withIndex {
		if err := h.p.Store.Delete(ctx, IndexKey("r1")); err != nil {
			t.Fatal(err)
		}
	}
	cs := newCountingStore(h.p.Store)
	h.p.Store = cs
	last := p.Clusters[len(p.Clusters)-1].Name
	if r := h.step(t, last, "gate"); r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 {
		t.Fatalf("%s: %+v", last, r)
	}
	held, _ = cs.counts()
	cs.reset()
	first := p.Clusters[0].Name
	if r := h.step(t, first, "gate"); r.ExitCode != 0 || r.Attempt != 1 {
		t.Fatalf("%s: %+v", first, r)
	}
	admit, _ = cs.counts()
	return held, admit
}

// TestGateReadsTheIndex: a gate reads the run's index, not every
// cluster's state: its store reads do not grow with the fleet (the same
// at 30 and 120 clusters, a handful). A run without an index (planned
// before it) reads every state file, as gates did.
func TestGateReadsTheIndex(t *testing.T) {
	held30, admit30 := gateReads(t, 30, true)
	held120, admit120 := gateReads(t, 120, true)
	t.Logf("store reads: held gate %d (30 clusters) %d (120); admitting gate %d (30) %d (120)", held30, held120, admit30, admit120)
	if held120 != held30 || admit120 != admit30 {
		t.Errorf("reads grow with the fleet: held %d -> %d, admitting %d -> %d", held30, held120, admit30, admit120)
	}
	if held120 > 8 || admit120 > 20 {
		t.Errorf("held gate %d reads, admitting gate %d: want a handful", held120, admit120)
	}
	heldOld, admitOld := gateReads(t, 120, false)
	t.Logf("without an index (120 clusters): held gate %d reads, admitting gate %d", heldOld, admitOld)
	if heldOld < 120 || admitOld < 240 {
		t.Errorf("without an index: %d and %d reads: want every state file read", heldOld, admitOld)
	}
}

// TestIndexSurvivesACrashBetweenStateAndIndex: a runner that dies after
// writing a cluster's state and before writing the index (here: every
// index write fails from then on) leaves the cluster's entry pending, and
// the gates read that cluster's state file: the next ring sees the
// canary ring finished, and the caps see the finished cluster's place
// free. Once a later write of the cluster's summary lands, the entry is
// trusted again.
func TestIndexSurvivesACrashBetweenStateAndIndex(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC) // the prod window is open
	ctx := context.Background()
	for _, c := range []string{"canary-a", "canary-b"} {
		h.runCluster(t, c)
	}
	c, _ := h.p.Plan.Cluster("canary-c")
	steps := c.Steps
	for _, s := range steps[:len(steps)-1] {
		if r := h.step(t, "canary-c", s.Name); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s.Name, r)
		}
	}
	cs := newCountingStore(h.p.Store)
	h.p.Store = cs
	cs.failIndex = true
	if r := h.step(t, "canary-c", steps[len(steps)-1].Name); r.ExitCode != 0 {
		t.Fatalf("last step: %+v", r)
	}
	if h.state(t, "canary-c").FinishedAt == nil {
		t.Fatal("canary-c's state does not say it finished")
	}
	// canary-c's state says it finished; what the index says of it
	// must not stop the next ring.
	h.clock = h.clock.Add(2 * time.Hour)
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != 0 || r.Attempt != 1 {
		t.Fatalf("prod-use1's gate after the canary ring and its soak: %+v: the gate went by a stale index", r)
	}
	states, err := readGateStates(ctx, cs, h.p.Plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !states["canary-c"].Decided() || states["canary-c"].InFlight() {
		t.Errorf("canary-c read as %+v", states["canary-c"])
	}
	idx, _, ok, err := readIndex(ctx, cs, "r1")
	if err != nil || !ok {
		t.Fatalf("index: %v %v", ok, err)
	}
	e := idx.Clusters["canary-c"]
	if e.Pending == "" || e.FinishedAt != nil {
		t.Errorf("canary-c's entry %+v: want pending, not finished (the index write failed)", e)
	}
	// The index writes work again: the next change of canary-c's
	// summary clears its entry.
	cs.failIndex = false
	st := h.state(t, "canary-c")
	st.Outcome = OutcomeSkipped
	if err := WriteState(ctx, cs, st); err != nil {
		t.Fatal(err)
	}
	idx, _, _, _ = readIndex(ctx, cs, "r1")
	if e := idx.Clusters["canary-c"]; e.Pending != "" || e.FinishedAt == nil || e.Outcome != OutcomeSkipped {
		t.Errorf("canary-c's entry after a later write: %+v", e)
	}
}

// TestSummaryStateIsNeverWritten: a state the gates made from the index
// cannot be written over the state file.
func TestSummaryStateIsNeverWritten(t *testing.T) {
	h := newHarness(t, nil)
	states, err := readGateStates(context.Background(), h.p.Store, h.p.Plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteState(context.Background(), h.p.Store, states["canary-a"]); err == nil {
		t.Error("a state read from the index was written")
	}
}
