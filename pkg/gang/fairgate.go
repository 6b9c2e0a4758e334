package gang

// Fair shares of the requests in flight: each stopped gang deletes its
// pods through a rate limiter of its own, but the API server serves them
// all, and a gang-drain user's requests share one queue there (one flow of
// API Priority and Fairness per user). So the run bounds its pod writes in
// flight across gangs and hands each freed slot to the waiting gang with
// the fewest in flight: the few writes of a small gang go out next to a
// large gang's, never behind them.

import (
	"context"
	"sync"
)

// podWritesInFlight bounds the pod writes (finalizer patches, deletes,
// re-reads) of all gangs in flight at once. At 200 requests a second and
// answers within half a second, as on a busy two-core control plane, a
// hundred are needed; more only lengthen the API server's queue.
const podWritesInFlight = 128

// fairGate is a counting semaphore that serves the waiting key with the
// fewest slots held first.
type fairGate struct {
	mu       sync.Mutex
	free     int
	held     map[string]int
	waiting  map[string][]chan struct{}
	waitKeys []string // keys with waiters, in the order they first waited
}

func newFairGate(n int) *fairGate {
	return &fairGate{free: n, held: map[string]int{}, waiting: map[string][]chan struct{}{}}
}

// acquire takes a slot for key, waiting for one while none is free.
func (f *fairGate) acquire(ctx context.Context, key string) error {
	f.mu.Lock()
	if f.free > 0 && len(f.waitKeys) == 0 {
		f.free--
		f.held[key]++
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if len(f.waiting[key]) == 0 {
		f.waitKeys = append(f.waitKeys, key)
	}
	f.waiting[key] = append(f.waiting[key], ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	for i, c := range f.waiting[key] {
		if c == ch {
			f.waiting[key] = append(f.waiting[key][:i], f.waiting[key][i+1:]...)
			f.dropKey(key)
			f.mu.Unlock()
			return ctx.Err()
		}
	}
	f.mu.Unlock()
	// Granted meanwhile: give it back.
	f.release(key)
	return ctx.Err()
}

// release returns a slot of key and grants it to the waiting key that
// holds the fewest.
func (f *fairGate) release(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[key]--
	if f.held[key] == 0 {
		delete(f.held, key)
	}
	if len(f.waitKeys) == 0 {
		f.free++
		return
	}
	next := f.waitKeys[0]
	for _, k := range f.waitKeys[1:] {
		if f.held[k] < f.held[next] {
			next = k
		}
	}
	ch := f.waiting[next][0]
	f.waiting[next] = f.waiting[next][1:]
	f.dropKey(next)
	f.held[next]++
	close(ch)
}

// dropKey forgets key among the waiting once none of it waits.
func (f *fairGate) dropKey(key string) {
	if len(f.waiting[key]) > 0 {
		return
	}
	delete(f.waiting, key)
	for i, k := range f.waitKeys {
		if k == key {
			f.waitKeys = append(f.waitKeys[:i], f.waitKeys[i+1:]...)
			return
		}
	}
}
