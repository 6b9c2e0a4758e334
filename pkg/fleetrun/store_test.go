package fleetrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
)

// storeContract is what every Store must do.
func storeContract(t *testing.T, s Store) {
	ctx := context.Background()
	if _, err := s.Read(ctx, "runs/r/plan.json"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if err := s.Write(ctx, "runs/r/state/a.json", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "runs/r/state/a.json", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read(ctx, "runs/r/state/a.json"); err != nil || string(b) != "2" {
		t.Fatalf("read %q %v", b, err)
	}
	if err := s.Create(ctx, "runs/r/evidence/a/x/1/meta.json", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "runs/r/evidence/a/x/1/meta.json", []byte("second")); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if b, _ := s.Read(ctx, "runs/r/evidence/a/x/1/meta.json"); string(b) != "first" {
		t.Fatalf("create overwrote: %q", b)
	}
	keys, err := s.List(ctx, "runs/r/")
	if err != nil || strings.Join(keys, ",") != "runs/r/evidence/a/x/1/meta.json,runs/r/state/a.json" {
		t.Fatalf("list %v %v", keys, err)
	}
	if err := s.Delete(ctx, "runs/r/state/a.json"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "runs/r/state/a.json"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if err := s.Write(ctx, "../escape", nil); err == nil {
		t.Error("a key outside the store was accepted")
	}
	// Only one of many concurrent creates of one key wins.
	var wg sync.WaitGroup
	wins := make(chan int, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.Create(ctx, "runs/r/lock", []byte(fmt.Sprint(i))) == nil {
				wins <- i
			}
		}()
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d creates of one key succeeded", n)
	}
}

func TestDirStore(t *testing.T) {
	s := tempStore(t)
	storeContract(t, s)
	// No temporary file is left behind, and a write never shows half a
	// file: the key is replaced by a rename.
	var tmp []string
	_ = filepath.WalkDir(s.dir, func(p string, d os.DirEntry, _ error) error {
		if strings.Contains(d.Name(), ".tmp-") {
			tmp = append(tmp, p)
		}
		return nil
	})
	if len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

func TestOpenStoreURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenStore(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*DirStore); !ok || s.URL() != "file://"+dir {
		t.Errorf("file store %T %s", s, s.URL())
	}
	for _, bad := range []string{"ftp://x", "file://host/x", "file://"} {
		if _, err := OpenStore(ctx, bad); err == nil {
			t.Errorf("%s opened", bad)
		}
	}
}

// TestBlobStore runs the contract on gocloud.dev's in-memory bucket, the
// driver-neutral half of the object-store path (e2e/fleet runs it on an S3
// server).
func TestBlobStore(t *testing.T) {
	storeContract(t, &blobStore{b: memblob.OpenBucket(nil), url: "mem://"})
}

// casContract is what every Store's compare-and-swap must do: of writers
// that read one version exactly one wins, whatever the others do.
func casContract(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	key := "runs/r/state/cas.json"
	if _, _, err := s.ReadVersion(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	v1, err := s.Update(ctx, key, []byte("one"), "")
	if err != nil {
		t.Fatalf("update of a new key: %v", err)
	}
	if _, err := s.Update(ctx, key, []byte("again"), ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("update from \"\" of an existing key: %v", err)
	}
	if b, v, err := s.ReadVersion(ctx, key); err != nil || string(b) != "one" || v != v1 {
		t.Fatalf("read %q %q %v, want one at %q", b, v, err, v1)
	}
	v2, err := s.Update(ctx, key, []byte("two"), v1)
	if err != nil || v2 == v1 {
		t.Fatalf("update from the version read: %q %v", v2, err)
	}
	if _, err := s.Update(ctx, key, []byte("stale"), v1); !errors.Is(err, ErrConflict) {
		t.Fatalf("update from a version overwritten since: %v", err)
	}
	if b, _ := s.Read(ctx, key); string(b) != "two" {
		t.Fatalf("a conflicting update wrote: %q", b)
	}
	// An unconditional write moves the version on.
	if err := s.Write(ctx, key, []byte("three")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, key, []byte("stale"), v2); !errors.Is(err, ErrConflict) {
		t.Fatalf("update from a version a Write replaced: %v", err)
	}
	_, v3, err := s.ReadVersion(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	// Many updates from one version at once: exactly one wins, the others
	// conflict, and the key holds the winner's bytes.
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []int
	conflicts := 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Update(ctx, key, []byte(fmt.Sprintf("writer %d", i)), v3)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, i)
			case errors.Is(err, ErrConflict):
				conflicts++
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 || conflicts != n-1 {
		t.Fatalf("%d updates from one version won (%v), %d conflicted; want 1 and %d", len(won), won, conflicts, n-1)
	}
	if b, _ := s.Read(ctx, key); string(b) != fmt.Sprintf("writer %d", won[0]) {
		t.Fatalf("key holds %q, the winner was writer %d", b, won[0])
	}

	// Create on an existing key.
	if err := s.Create(ctx, key, []byte("x")); !errors.Is(err, ErrExists) {
		t.Fatalf("create of an existing key: %v", err)
	}

	// The run lock: taken, refused while held, and of many takers of one
	// expired lock exactly one owns it.
	lk := "runs/r/lock"
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	mine, _, err := takeLock(ctx, s, lk, lockRecord{Holder: "first", Expires: now.Add(30 * time.Second)}, now)
	if err != nil {
		t.Fatalf("taking a free lock: %v", err)
	}
	if _, old, err := takeLock(ctx, s, lk, lockRecord{Holder: "second", Expires: now.Add(40 * time.Second)}, now.Add(10*time.Second)); !errors.Is(err, errLockHeld) || old.Holder != "first" {
		t.Fatalf("taking a held lock: %v (holder %q)", err, old.Holder)
	}
	later := now.Add(time.Minute)
	var owners []string
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := lockRecord{Holder: fmt.Sprintf("taker-%d", i), Expires: later.Add(30 * time.Second)}
			_, old, err := takeLock(ctx, s, lk, me, later)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if old.Holder != "first" {
					t.Errorf("%s took the lock from %q, not from the expired first holder", me.Holder, old.Holder)
				}
				owners = append(owners, me.Holder)
			case errors.Is(err, ErrConflict), errors.Is(err, errLockHeld):
			default:
				t.Errorf("%s: %v", me.Holder, err)
			}
		}()
	}
	wg.Wait()
	if len(owners) != 1 {
		t.Fatalf("%d takers own the expired lock (%v), want exactly one", len(owners), owners)
	}
	b, lv, err := s.ReadVersion(ctx, lk)
	var lr lockRecord
	if err != nil || json.Unmarshal(b, &lr) != nil || lr.Holder != owners[0] {
		t.Fatalf("lock holds %s (%v), the owner is %s", b, err, owners[0])
	}
	// The first holder, back late, cannot release the new owner's lock;
	// the owner can, and the lock is free again.
	if err := releaseLock(ctx, s, lk, mine); err != nil {
		t.Fatal(err)
	}
	if b2, _ := s.Read(ctx, lk); string(b2) != string(b) {
		t.Fatalf("a stale release changed the lock: %s", b2)
	}
	if err := releaseLock(ctx, s, lk, lv); err != nil {
		t.Fatal(err)
	}
	if _, _, err := takeLock(ctx, s, lk, lockRecord{Holder: "next", Expires: later.Add(time.Minute)}, later); err != nil {
		t.Fatalf("taking a released lock: %v", err)
	}
}

func TestDirStoreCompareAndSwap(t *testing.T) {
	casContract(t, tempStore(t))
}

// TestBlobStoreCompareAndSwapInProcess runs the contract on memblob, whose
// writers take no conditions: there Update compares and writes under a
// mutex of the store, which is what the contract needs within a process.
func TestBlobStoreCompareAndSwapInProcess(t *testing.T) {
	casContract(t, &blobStore{b: memblob.OpenBucket(nil), url: "mem://"})
}

// TestRunnersRaceOnOneStep starts one step of one cluster from several
// runners at once, as two engines (or an engine and a person) would: the
// claim is a compare-and-swap of the cluster's state, so the step's
// command runs once and every other runner finds it claimed or done.
func TestRunnersRaceOnOneStep(t *testing.T) {
	raceOneStep(t, newHarness(t, nil))
}

func raceOneStep(t *testing.T, h *harness) {
	t.Helper()
	cp, _ := h.p.Plan.Cluster("canary-a")
	if r := h.step(t, "canary-a", cp.Steps[0].Name); r.ExitCode != 0 {
		t.Fatalf("%s: %+v", cp.Steps[0].Name, r)
	}
	first := cp.Steps[1]
	const n = 8
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]*StepResult, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		p := *h.p
		p.Holder = fmt.Sprintf("runner/%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = p.RunStep(context.Background(), "canary-a", first.Name)
		}()
	}
	close(start)
	wg.Wait()
	ran := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("runner %d: %v", i, errs[i])
		}
		if results[i].Skipped == "" && results[i].ExitCode == 0 {
			ran++
		}
	}
	if len(h.exec.calls) != 1 || ran != 1 {
		t.Fatalf("step %s ran %d commands from %d runners, want 1:\n%s", first.Name, len(h.exec.calls), ran, strings.Join(h.exec.commands(), "\n"))
	}
	st := h.state(t, "canary-a")
	if ss := st.Step(first.Name); ss.Phase != PhaseCompleted || ss.Attempt != 1 {
		t.Fatalf("step %s: %+v", first.Name, ss)
	}
}

// TestTakenOverRunnerStops: a runner whose step another runner took over
// (its heartbeat looked stale to the other) finds its next heartbeat
// refused, stops the step's command and leaves the other's record alone.
func TestTakenOverRunnerStops(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.p.Heartbeat = 20 * time.Millisecond
	cp, _ := h.p.Plan.Cluster("canary-a")
	var drain Step
	for _, s := range cp.Steps {
		if s.Kind == StepDrain {
			drain = s
			break
		}
		if r := h.step(t, "canary-a", s.Name); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s.Name, r)
		}
	}
	h.exec.mu.Lock()
	h.exec.block = true
	h.exec.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := h.p.RunStep(ctx, "canary-a", drain.Name)
		done <- err
	}()
	// The other runner's take-over: a compare-and-swap like any claim,
	// tried again while the first runner's heartbeats move the version.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the drain was never claimed, or never taken over")
		}
		st := h.state(t, "canary-a")
		ss := st.Step(drain.Name)
		if ss.Phase != PhaseInProgress || ss.Holder != "test/1" {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		ss.Holder, ss.Attempt = "other/2", ss.Attempt+1
		if err := WriteState(ctx, h.p.Store, st); err == nil {
			break
		} else if !errors.Is(err, ErrConflict) {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "taken over by another runner") {
			t.Fatalf("the first runner ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first runner did not stop after its step was taken over")
	}
	if ss := h.state(t, "canary-a").Step(drain.Name); ss.Holder != "other/2" || ss.Phase != PhaseInProgress || ss.Attempt != 2 {
		t.Fatalf("the taken-over runner wrote over the other's record: %+v", ss)
	}
}

// An S3 store with no region anywhere (URL, environment, config file) is
// refused when opened, in the suite's words, not at the first read with
// the SDK's.
func TestOpenStoreS3NeedsRegion(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials")} {
		t.Setenv(k, v)
	}
	_, err := OpenStore(context.Background(), "s3://gpufleet-state/prod")
	if err == nil || !strings.Contains(err.Error(), "no AWS region: add ?region=REGION to the URL or set AWS_REGION") {
		t.Fatalf("no region: %v", err)
	}
	if _, err := OpenStore(context.Background(), "s3://gpufleet-state/prod?region=us-east-1"); err != nil {
		t.Fatalf("region in the URL: %v", err)
	}
	t.Setenv("AWS_REGION", "eu-west-1")
	if _, err := OpenStore(context.Background(), "s3://gpufleet-state/prod"); err != nil {
		t.Fatalf("AWS_REGION: %v", err)
	}
}
