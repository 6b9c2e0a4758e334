// Package scenario reads the demo fleet described as data in
// testdata/demo/scenario.yaml and creates it on a local control plane:
// fake GPU pools, the manifests of that folder applied in order and waited
// for, a CRD whose storage version moved, and calls to a deprecated API.
// cmd/democluster and the e2e tests share it, so the demo and its test see
// the same fleet.
package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// DefaultFile is the demo scenario, relative to the repository root.
const DefaultFile = "testdata/demo/scenario.yaml"

// Scenario is testdata/demo/scenario.yaml.
type Scenario struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	Upgrade             Upgrade              `json:"upgrade"`
	Pools               []Pool               `json:"pools"`
	Manifests           []Manifest           `json:"manifests"`
	StorageVersionMoves []StorageVersionMove `json:"storageVersionMoves"`
	DeprecatedCalls     []DeprecatedCall     `json:"deprecatedCalls"`
	Gang                Gang                 `json:"gang"`

	// Dir is the folder the scenario was read from; manifest files are
	// relative to it.
	Dir string `json:"-"`
}

// Upgrade is the job of the demo.
type Upgrade struct {
	Pool           string `json:"pool"`
	Target         string `json:"target"`
	KubeletVersion string `json:"kubeletVersion"`
}

// Pool is a set of fake GPU nodes.
type Pool struct {
	Name           string `json:"name"`
	Nodes          int    `json:"nodes"`
	KubeletVersion string `json:"kubeletVersion"`
	RackSets       int    `json:"rackSets"`
}

// Manifest is one YAML file of objects.
type Manifest struct {
	File string `json:"file"`
	// Needs is "queueing" for files that need Kueue and JobSet.
	Needs string `json:"needs,omitempty"`
}

// StorageVersionMove makes To the storage version of a CRD.
type StorageVersionMove struct {
	CRD string `json:"crd"`
	To  string `json:"to"`
}

// DeprecatedCall is a GET an old client makes.
type DeprecatedCall struct {
	UserAgent string `json:"userAgent"`
	Get       string `json:"get"`
}

// Gang is the training gang and its scripted trainer.
type Gang struct {
	Namespace         string   `json:"namespace"`
	JobSet            string   `json:"jobSet"`
	LastCheckpointAge Duration `json:"lastCheckpointAge"`
	CheckpointTakes   Duration `json:"checkpointTakes"`
	CheckpointStep    string   `json:"checkpointStep"`
	CheckpointURI     string   `json:"checkpointURI"`
}

// Duration is a time.Duration written as "40m".
type Duration struct{ time.Duration }

// UnmarshalJSON reads "40m", "3s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// Load reads and checks a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(b, s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Dir, err = filepath.Abs(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// LoadDefault reads DefaultFile from the repository root.
func LoadDefault() (*Scenario, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	return Load(filepath.Join(root, DefaultFile))
}

func (s *Scenario) validate() error {
	if s.Kind != "DemoScenario" {
		return fmt.Errorf("kind %q, want DemoScenario", s.Kind)
	}
	var errs []error
	pools := map[string]bool{}
	for _, p := range s.Pools {
		if p.Name == "" || p.Nodes <= 0 {
			errs = append(errs, fmt.Errorf("pool %q: needs a name and nodes > 0", p.Name))
		}
		pools[p.Name] = true
	}
	if !pools[s.Upgrade.Pool] {
		errs = append(errs, fmt.Errorf("upgrade.pool %q is not one of the pools", s.Upgrade.Pool))
	}
	if s.Upgrade.Target == "" || s.Upgrade.KubeletVersion == "" {
		errs = append(errs, errors.New("upgrade needs target and kubeletVersion"))
	}
	for _, m := range s.Manifests {
		if m.Needs != "" && m.Needs != "queueing" {
			errs = append(errs, fmt.Errorf("manifest %s: needs %q, want queueing or nothing", m.File, m.Needs))
		}
		if _, err := os.Stat(filepath.Join(s.Dir, m.File)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PoolSelector is the label selector of the pool to upgrade.
func (s *Scenario) PoolSelector() string {
	return localcluster.PoolLabel + "=" + s.Upgrade.Pool
}

// Pool returns the pool to upgrade.
func (s *Scenario) Pool() Pool {
	for _, p := range s.Pools {
		if p.Name == s.Upgrade.Pool {
			return p
		}
	}
	return Pool{}
}

// NodeNames returns the node names of a pool, as CreateGPUNodes names them.
func (p Pool) NodeNames() []string {
	out := make([]string, p.Nodes)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", p.Name, i)
	}
	return out
}
