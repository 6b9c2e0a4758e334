package apilifecycle

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// featuregates-removed.yaml is the Kubernetes feature gates each minor
// release removed, generated from the release tags of kubernetes/kubernetes
// (internal/gen/gates; the file's header says how).
//
//go:embed featuregates-removed.yaml
var embeddedFeatureGates []byte

// RemovedGate is a feature gate a release removed: a component of that
// release refuses it ("unrecognized feature gate").
type RemovedGate struct {
	// Name is the gate as the --feature-gates flag and the kubelet's
	// featureGates take it.
	Name string `json:"name"`
	// RemovedIn is the first release without it.
	RemovedIn Release `json:"removedIn"`
	// LastStage is its stage in the last release that had it (Alpha,
	// Beta, GA, Deprecated).
	LastStage string `json:"lastStage,omitempty"`
}

// FeatureGates is the removed-gate data and where it came from.
type FeatureGates struct {
	// DataDate is when the data was generated (YYYY-MM-DD).
	DataDate string `json:"dataDate"`
	// Source and Tags are the repository and the release tags compared.
	Source string        `json:"source"`
	Tags   []string      `json:"tags,omitempty"`
	Gates  []RemovedGate `json:"gates"`
	// File is the file it was read from ("" for the embedded data).
	File string `json:"file,omitempty"`

	byName map[string]int
}

// ParseFeatureGates reads removed-gate data (YAML or JSON, as the embedded
// featuregates-removed.yaml) and checks it.
func ParseFeatureGates(data []byte) (*FeatureGates, error) {
	var fg FeatureGates
	if err := yaml.UnmarshalStrict(data, &fg); err != nil {
		return nil, fmt.Errorf("removed feature gates: %w", err)
	}
	if _, err := time.Parse("2006-01-02", fg.DataDate); err != nil {
		return nil, fmt.Errorf("removed feature gates: dataDate %q: want YYYY-MM-DD", fg.DataDate)
	}
	if strings.TrimSpace(fg.Source) == "" {
		return nil, fmt.Errorf("removed feature gates: no source")
	}
	fg.byName = map[string]int{}
	for i, g := range fg.Gates {
		if g.Name == "" || g.RemovedIn.IsZero() {
			return nil, fmt.Errorf("removed feature gates: entry %d needs a name and removedIn", i+1)
		}
		if _, dup := fg.byName[g.Name]; dup {
			return nil, fmt.Errorf("removed feature gates: %s listed twice", g.Name)
		}
		fg.byName[g.Name] = i
	}
	sort.SliceStable(fg.Gates, func(i, j int) bool {
		if c := fg.Gates[i].RemovedIn.Compare(fg.Gates[j].RemovedIn); c != 0 {
			return c < 0
		}
		return fg.Gates[i].Name < fg.Gates[j].Name
	})
	for i, g := range fg.Gates {
		fg.byName[g.Name] = i
	}
	return &fg, nil
}

var defaultFeatureGates = func() *FeatureGates {
	fg, err := ParseFeatureGates(embeddedFeatureGates)
	if err != nil {
		panic("embedded featuregates-removed.yaml: " + err.Error()) // a build defect, caught by the tests
	}
	return fg
}()

// DefaultFeatureGates returns the embedded removed-gate data.
func DefaultFeatureGates() *FeatureGates { return defaultFeatureGates }

// Removed returns the gate's entry when a release removed it.
func (fg *FeatureGates) Removed(name string) (RemovedGate, bool) {
	if fg == nil {
		fg = defaultFeatureGates
	}
	i, ok := fg.byName[name]
	if !ok {
		return RemovedGate{}, false
	}
	return fg.Gates[i], true
}

// RemovedBetween reports whether a release after from and at or before to
// removed the gate: a node that moved from from to to had to drop it.
func (fg *FeatureGates) RemovedBetween(name string, from, to Release) (RemovedGate, bool) {
	g, ok := fg.Removed(name)
	if !ok || from.IsZero() || to.IsZero() {
		return RemovedGate{}, false
	}
	return g, g.RemovedIn.Compare(from) > 0 && g.RemovedIn.Compare(to) <= 0
}
