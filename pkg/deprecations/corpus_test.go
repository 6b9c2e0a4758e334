package deprecations

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// corpusDir is the shared real-world corpus, read in place (never copied
// into the repository).
var corpusDir = filepath.Join("..", "..", "..", "shared", "corpus")

func corpus(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(corpusDir, "README.md")); err != nil {
		t.Skipf("corpus not present at %s", corpusDir)
	}
	return corpusDir
}

// Published figures for the corpus at 1.37 (its README): objects on APIs
// deprecated or removed per the markers, and what pluto 5.24.0 reports.
const (
	corpusDeprecatedObjects = 194
	plutoReported           = 145
)

func scanCorpus(t testing.TB, paths ...string) ([]Finding, ManifestResult) {
	t.Helper()
	s := &ManifestScanner{}
	res, err := s.ScanPaths(context.Background(), paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Classify(apilifecycle.Builtin(), Target{Release: apilifecycle.R(1, 37)}, res.Findings), res
}

// TestCorpusAccuracy scans the whole corpus at 1.37: every finding must
// point at a line of its file that declares it, every deprecated object
// must be found or reported as undeterminable, and nothing may be dropped
// silently.
func TestCorpusAccuracy(t *testing.T) {
	dir := corpus(t)
	fs, res := scanCorpus(t, dir)
	var determinate, unknown, removed, deprecated int
	files := map[string][]string{}
	for _, f := range fs {
		switch f.Status {
		case StatusUnknown:
			unknown++
		case StatusRemoved:
			removed++
			determinate++
		case StatusDeprecated:
			deprecated++
			determinate++
		}
		if _, ok := files[f.File]; !ok {
			b, err := os.ReadFile(f.File)
			if err != nil {
				t.Fatal(err)
			}
			files[f.File] = strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
		}
		lines := files[f.File]
		if f.Line < 1 || f.Line > len(lines) {
			t.Errorf("%s: line out of range", f.Location)
			continue
		}
		l := lines[f.Line-1]
		// A finding from a Helm release Secret points at the Secret; any
		// other must sit on a line naming its apiVersion or kind.
		if f.Who == "" && !strings.Contains(l, f.APIVersion) && !strings.Contains(l, f.Kind) {
			t.Errorf("%s: %s %s is not on that line: %q", f.Location, f.APIVersion, f.Kind, l)
		}
		if !f.Undeterminable {
			e, ok := apilifecycle.Builtin().Lookup(f.APIVersion, f.Kind)
			if !ok || e.StatusAt(apilifecycle.R(1, 37)) == apilifecycle.StatusOK {
				t.Errorf("%s: %s %s is not deprecated at 1.37", f.Location, f.APIVersion, f.Kind)
			}
		}
	}
	partial, unparsed := 0, 0
	for _, s := range res.Skipped {
		if s.Partial {
			partial++
		} else {
			unparsed++
			t.Logf("not scanned: %s:%d: %s", s.File, s.Line, s.Reason)
		}
	}
	t.Logf("corpus at 1.37: %d files, %d objects; %d findings (%d removed, %d deprecated) + %d undeterminable (templated apiVersion); %d files partly scanned (templates), %d not scanned; pluto reports %d, the corpus README counts %d",
		res.Files, res.Objects, determinate, removed, deprecated, unknown, partial, unparsed, plutoReported, corpusDeprecatedObjects)
	if determinate+unknown < corpusDeprecatedObjects {
		t.Errorf("found %d + %d undeterminable, want at least the %d deprecated objects", determinate, unknown, corpusDeprecatedObjects)
	}
	if res.Objects < 1000 {
		t.Errorf("read only %d objects", res.Objects)
	}
}

type objKey struct{ APIVersion, Kind, Name string }

func keys(fs []Finding) []objKey {
	var out []objKey
	for _, f := range fs {
		out = append(out, objKey{f.APIVersion, f.Kind, f.Name})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.APIVersion+a.Kind+a.Name < b.APIVersion+b.Kind+b.Name
	})
	return out
}

// TestCorpusVariants: the byte-level variants (CRLF, BOM, Lists, JSON,
// JSON streams, flow style, reversed keys) yield exactly the findings of
// the files they were made from.
func TestCorpusVariants(t *testing.T) {
	dir := corpus(t)
	p := func(parts ...string) string { return filepath.Join(append([]string{dir}, parts...)...) }
	flannel := p("public", "flannel-v0.11.0", "Documentation", "kube-flannel.yml")
	metallb := p("public", "metallb-v0.9.6", "manifests", "metallb.yaml")
	nginx := p("public", "ingress-nginx-controller-v0.34.1", "deploy", "static", "provider", "cloud", "deploy.yaml")
	var flannelJSON []string
	matches, _ := filepath.Glob(p("derived", "json", "flannel-v0.11.0-*.json"))
	flannelJSON = append(flannelJSON, matches...)
	for _, tc := range []struct {
		source   string
		variants [][]string
	}{
		{flannel, [][]string{{p("derived", "crlf", "flannel-v0.11.0-kube-flannel.yml")}, {p("derived", "yaml-style", "flannel-v0.11.0-flow-style.yaml")},
			{p("derived", "yaml-style", "flannel-v0.11.0-reversed-keys.yaml")}, flannelJSON}},
		{metallb, [][]string{{p("derived", "bom-crlf", "metallb-v0.9.6-metallb.yaml")}, {p("derived", "list", "metallb-v0.9.6-as-list.yaml")},
			{p("derived", "json", "metallb-v0.9.6-stream.json")}}},
		{nginx, [][]string{{p("derived", "crlf", "ingress-nginx-v0.34.1-cloud-deploy.yaml")}, {p("derived", "list", "ingress-nginx-v0.34.1-cloud-as-list.json")}}},
	} {
		want, _ := scanCorpus(t, tc.source)
		if len(want) == 0 {
			t.Fatalf("%s: no findings", tc.source)
		}
		for _, v := range tc.variants {
			got, res := scanCorpus(t, v...)
			if d := cmp.Diff(keys(want), keys(got)); d != "" {
				t.Errorf("%s differs from %s (-source +variant):\n%s", v[0], tc.source, d)
			}
			for _, s := range res.Skipped {
				t.Errorf("%s: skipped %+v", v[0], s)
			}
		}
	}
}

var (
	docSeparator = regexp.MustCompile(`(?m)^---.*$`)
	topAPI       = regexp.MustCompile(`(?m)^apiVersion:[ \t]*["']?([^\s"'#]+)`)
	topKind      = regexp.MustCompile(`(?m)^kind:[ \t]*["']?([^\s"'#]+)`)
)

// TestCorpusMissesNothing counts the corpus a second, independent way: in
// every YAML file, each document whose top-level apiVersion and kind lines
// name an API deprecated or removed at 1.37 (templates included, where
// those two lines are literal). The scanner must report at least that
// many objects in every file; it may report more, from Lists, flow style
// and Helm release records, which this count cannot read. The corpus
// README's 194 is an approximate figure; this count is checkable.
func TestCorpusMissesNothing(t *testing.T) {
	dir := corpus(t)
	table := apilifecycle.Builtin()
	target := apilifecycle.R(1, 37)
	fs, _ := scanCorpus(t, dir)
	found := map[string]int{}
	for _, f := range fs {
		if f.Status != StatusUnknown {
			found[f.File]++
		}
	}
	want, files := 0, 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n := 0
		text := strings.ReplaceAll(strings.TrimPrefix(string(b), "\ufeff"), "\r\n", "\n")
		for _, doc := range docSeparator.Split(text, -1) {
			kinds := topKind.FindAllStringSubmatch(doc, -1)
			if len(kinds) == 0 {
				continue
			}
			seen := map[string]bool{}
			for _, m := range topAPI.FindAllStringSubmatch(doc, -1) {
				if seen[m[1]] {
					continue
				}
				seen[m[1]] = true
				if e, ok := table.Lookup(m[1], kinds[0][1]); ok && e.StatusAt(target) != apilifecycle.StatusOK {
					n++
				}
			}
		}
		if n == 0 {
			return nil
		}
		want += n
		files++
		if found[p] < n {
			t.Errorf("%s: %d objects on deprecated or removed APIs, the scanner reports %d", p, n, found[p])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range found {
		total += n
	}
	t.Logf("independent count: %d objects in %d YAML files; the scanner reports %d in all (Lists, flow style, JSON and Helm records included)", want, files, total)
	if want < 200 {
		t.Errorf("the independent count found only %d objects; is the corpus complete?", want)
	}
}
