package fleetrun

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
)

// unavailable is a store's 503, as the providers' SDKs report one.
type unavailable struct{}

func (unavailable) Error() string       { return "503 Service Unavailable" }
func (unavailable) HTTPStatusCode() int { return 503 }

// faultyStore fails the next Updates of keys ending in a suffix: with a
// 503 (transient) or as a lost compare-and-swap (ErrConflict).
type faultyStore struct {
	Store
	mu     sync.Mutex
	faults map[string][]error // key suffix -> errors to return, in order
}

func (s *faultyStore) Update(ctx context.Context, key string, data []byte, version string) (string, error) {
	s.mu.Lock()
	for suffix, errs := range s.faults {
		if strings.HasSuffix(key, suffix) && len(errs) > 0 {
			s.faults[suffix] = errs[1:]
			s.mu.Unlock()
			return "", errs[0]
		}
	}
	s.mu.Unlock()
	return s.Store.Update(ctx, key, data, version)
}

// TestStoreRetriesAreCounted: a gate attempt meets two 503s on the run's
// index and one lost compare-and-swap on its claim; the step completes
// (no person is asked) and its result, its evidence's meta.json and its
// record in the state count one conflict and two transient retries.
func TestStoreRetriesAreCounted(t *testing.T) {
	h := newHarness(t, nil)
	fs := &faultyStore{Store: h.p.Store, faults: map[string][]error{
		"/index.json":          {unavailable{}, unavailable{}},
		"/state/canary-a.json": {fmt.Errorf("test: %w", ErrConflict)},
	}}
	h.p.Store = fs
	cp, _ := h.p.Plan.Cluster("canary-a")
	gate := cp.Steps[0]
	r := h.step(t, "canary-a", gate.Name)
	if r.ExitCode != 0 {
		t.Fatalf("%s: exit %d: %s", gate.Name, r.ExitCode, r.Message)
	}
	for k, errs := range fs.faults {
		if len(errs) > 0 {
			t.Fatalf("the faults on %s were not all met: %d left", k, len(errs))
		}
	}
	want := StoreRetries{Conflicts: 1, Transient: 2}
	if r.StoreRetries == nil || *r.StoreRetries != want {
		t.Errorf("the step's result counts %+v, want %+v", r.StoreRetries, want)
	}
	ss := h.state(t, "canary-a").Step(gate.Name)
	if ss.StoreRetries == nil || *ss.StoreRetries != want {
		t.Errorf("the step's record counts %+v, want %+v", ss.StoreRetries, want)
	}
	var meta stepMeta
	b, err := h.p.Store.Read(context.Background(), path.Join(EvidencePrefix("r1", "canary-a", gate.Name, ss.Attempt), "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.StoreRetries == nil || *meta.StoreRetries != want {
		t.Errorf("the attempt's meta.json counts %+v, want %+v:\n%s", meta.StoreRetries, want, b)
	}
}
