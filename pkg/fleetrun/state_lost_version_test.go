package fleetrun

import (
	"context"
	"errors"
	"testing"
)

// lossyStore loses the new version of its next Update, as a blob store
// does when the read-back after a landed write fails.
type lossyStore struct {
	Store
	lose bool
}

func (s *lossyStore) Update(ctx context.Context, key string, data []byte, version string) (string, error) {
	v, err := s.Store.Update(ctx, key, data, version)
	if err == nil && s.lose {
		s.lose = false
		return superseded, nil
	}
	return v, err
}

// A runner whose own write landed but whose new version was lost writes
// again, since the store still holds its bytes; once another runner has
// written, it is refused.
func TestWriteStateRecoversItsOwnLostVersion(t *testing.T) {
	ctx := context.Background()
	dir, err := OpenDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &lossyStore{Store: dir, lose: true}
	s, err := ReadState(ctx, st, "r1", "canary-a", "canary")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteState(ctx, st, s); err != nil {
		t.Fatal(err)
	}
	if s.version != superseded {
		t.Fatalf("the first write's version was not lost: %q", s.version)
	}
	s.Baseline = "runs/r1/evidence/canary-a/preflight.yaml"
	if err := WriteState(ctx, st, s); err != nil {
		t.Fatalf("the runner's own landed write read as another's: %v", err)
	}
	other, err := ReadState(ctx, st, "r1", "canary-a", "canary")
	if err != nil {
		t.Fatal(err)
	}
	other.Baseline = "theirs"
	if err := WriteState(ctx, st, other); err != nil {
		t.Fatal(err)
	}
	s.Baseline = "mine again"
	if err := WriteState(ctx, st, s); !errors.Is(err, ErrConflict) {
		t.Fatalf("a write over another runner's state: %v, want ErrConflict", err)
	}
}
