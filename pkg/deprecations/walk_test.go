package deprecations

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// referenceWalk is the walk the scanner's own must equal: filepath.WalkDir
// with the scanner's rules.
func referenceWalk(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && manifestExt(d.Name()) {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func TestWalkMatchesWalkDir(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cron := "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: %s\n"
	for _, rel := range []string{
		"a.yaml", "B.yml", "c.JSON", "notes.txt", "z/deep/er/x.yaml", "m/.hidden/skipped.yaml",
		"m/.hidden.yaml", "m/n.yaml", "m/o/p.yml", "m-sibling.yaml", "m0/q.yaml", "empty/.keep",
	} {
		body := strings.ReplaceAll(cron, "%s", strings.NewReplacer("/", "-", ".", "-").Replace(strings.ToLower(rel)))
		if strings.HasSuffix(strings.ToLower(rel), ".json") {
			body = `{"apiVersion":"batch/v1beta1","kind":"CronJob","metadata":{"name":"c"}}`
		}
		write(rel, body)
	}
	if err := os.Symlink(filepath.Join(root, "a.yaml"), filepath.Join(root, "link-to-file.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "m"), filepath.Join(root, "link-to-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}

	for _, start := range []string{root, root + string(filepath.Separator), filepath.Join(root, "m"), filepath.Join(root, "link-to-dir")} {
		want, werr := referenceWalk(filepath.Clean(start))
		if start == filepath.Join(root, "link-to-dir") {
			want, werr = nil, nil // WalkDir does not follow a symbolic link given as root
		}
		got, gerr := Expand([]string{start})
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("%s: error %v, want %v", start, gerr, werr)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: walk differs from filepath.WalkDir (-want +got):\n%s", start, d)
		}
	}

	// The scan reads every file the walk hands out, relative to its
	// directory, and closes every directory it opened.
	before := openFDs(t)
	res, err := (&ManifestScanner{Workers: 3}).ScanPaths(context.Background(), []string{root, filepath.Join(root, "a.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := referenceWalk(root)
	if res.Files != len(want)+1 || len(res.Findings) != len(want)+1 {
		t.Errorf("files %d findings %d, want %d of each", res.Files, len(res.Findings), len(want)+1)
	}
	for i, f := range res.Findings[:len(want)] {
		if !strings.HasPrefix(f.Location, want[i]) {
			t.Errorf("finding %d at %s, want in %s (walk order)", i, f.Location, want[i])
		}
	}
	runtime.GC()
	if after := openFDs(t); after != before {
		t.Errorf("%d file descriptors open after the scan, %d before", after, before)
	}

	// A directory that cannot be read ends the walk with the error
	// filepath.WalkDir gives.
	if os.Geteuid() != 0 {
		locked := filepath.Join(root, "m", "o")
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(locked, 0o755)
		_, werr := referenceWalk(root)
		_, gerr := Expand([]string{root})
		if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
			t.Errorf("unreadable directory: error %v, want %v", gerr, werr)
		}
	}
}
