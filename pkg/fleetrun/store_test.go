package fleetrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
