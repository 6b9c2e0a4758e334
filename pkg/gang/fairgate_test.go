package gang

import (
	"context"
	"testing"
	"time"
)

// A gang that waits for a slot while a large gang holds them all gets the
// next one freed, ahead of the large gang's own waiters; a waiter whose
// context ends leaves the queue without taking a slot.
func TestFairGateServesTheGangWithFewestInFlight(t *testing.T) {
	g := newFairGate(2)
	ctx := context.Background()
	for range 2 {
		if err := g.acquire(ctx, "big"); err != nil {
			t.Fatal(err)
		}
	}
	order := make(chan string, 4)
	wait := func(key string) {
		go func() {
			if err := g.acquire(ctx, key); err == nil {
				order <- key
			}
		}()
	}
	waiting := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			g.mu.Lock()
			w := 0
			for _, ch := range g.waiting {
				w += len(ch)
			}
			g.mu.Unlock()
			if w == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters, want %d", w, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait("big")
	waiting(1)
	wait("big")
	waiting(2)
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() { gone <- g.acquire(cctx, "other") }()
	waiting(3)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled waiter got a slot")
	}
	wait("small")
	waiting(3)
	g.release("big")
	if got := <-order; got != "small" {
		t.Fatalf("first freed slot went to %s, want small", got)
	}
	g.release("big")
	g.release("small")
	for range 2 {
		if got := <-order; got != "big" {
			t.Fatalf("slot went to %s", got)
		}
	}
	g.release("big")
	g.release("big")
	if g.free != 2 || len(g.held) != 0 || len(g.waitKeys) != 0 {
		t.Errorf("after all releases: free %d held %v waiting %v", g.free, g.held, g.waitKeys)
	}
}
