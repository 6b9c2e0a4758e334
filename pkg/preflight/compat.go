package preflight

import (
	_ "embed"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

//go:embed compat.yaml
var embeddedCompat []byte

// Compatibility rules of a CompatAddon.
const (
	RuleReleases   = "releases"
	RuleMatchMinor = "matchMinor"
	RuleKubeadm    = "kubeadm"
	RuleSkewPolicy = "skewPolicy"
)

// Compat is the addon compatibility table: which addon releases support
// which Kubernetes minors, each addon with the page it came from.
type Compat struct {
	// DataDate is when the data was last checked (YYYY-MM-DD).
	DataDate string        `json:"dataDate"`
	Addons   []CompatAddon `json:"addons"`
}

// CompatAddon is one addon's compatibility rule.
type CompatAddon struct {
	// Name is the addon as the inventory names it.
	Name string `json:"name"`
	// Rule is releases, matchMinor, kubeadm or skewPolicy.
	Rule string `json:"rule"`
	// Source is the upstream page that states the rule.
	Source string `json:"source"`
	// Checked says what was read, where and when.
	Checked string `json:"checked,omitempty"`
	// Releases are the rows of a releases or kubeadm rule.
	Releases []CompatRelease `json:"releases,omitempty"`
}

// CompatRelease is one row: an addon release and the Kubernetes minors it
// supports (releases), or the addon version kubeadm installs with a
// Kubernetes minor (kubeadm).
type CompatRelease struct {
	// Version is the addon's MAJOR.MINOR (releases) or full version (kubeadm).
	Version string `json:"version"`
	// From and To bound the supported Kubernetes minors (releases).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Kubernetes is the minor kubeadm installs Version with (kubeadm).
	Kubernetes string `json:"kubernetes,omitempty"`
}

// DefaultCompat returns the embedded table.
func DefaultCompat() Compat {
	c, err := ParseCompat(embeddedCompat)
	if err != nil {
		return Compat{}
	}
	return c
}

// EmbeddedCompat returns the embedded table as shipped, comments included.
func EmbeddedCompat() []byte { return append([]byte(nil), embeddedCompat...) }

// ParseCompat reads a table in YAML or JSON and checks it.
func ParseCompat(data []byte) (Compat, error) {
	var c Compat
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Compat{}, fmt.Errorf("compat: %w", err)
	}
	if _, err := time.Parse("2006-01-02", c.DataDate); err != nil {
		return Compat{}, fmt.Errorf("compat: dataDate %q: want YYYY-MM-DD", c.DataDate)
	}
	seen := map[string]bool{}
	for i, a := range c.Addons {
		if a.Name == "" {
			return Compat{}, fmt.Errorf("compat: addon %d has no name", i)
		}
		if seen[a.Name] {
			return Compat{}, fmt.Errorf("compat: addon %s listed twice", a.Name)
		}
		seen[a.Name] = true
		if strings.TrimSpace(a.Source) == "" {
			return Compat{}, fmt.Errorf("compat: addon %s names no source page", a.Name)
		}
		switch a.Rule {
		case RuleReleases:
			for _, r := range a.Releases {
				if _, err := skew.ParseVersion(r.Version); err != nil {
					return Compat{}, fmt.Errorf("compat: %s release %q: %w", a.Name, r.Version, err)
				}
				from, err1 := skew.ParseVersion(r.From)
				to, err2 := skew.ParseVersion(r.To)
				if err1 != nil || err2 != nil || to.MinorsAfter(from) < 0 {
					return Compat{}, fmt.Errorf("compat: %s release %s: want from <= to as MAJOR.MINOR, got %q..%q", a.Name, r.Version, r.From, r.To)
				}
			}
		case RuleKubeadm:
			for _, r := range a.Releases {
				if _, err := skew.ParseVersion(r.Version); err != nil {
					return Compat{}, fmt.Errorf("compat: %s version %q: %w", a.Name, r.Version, err)
				}
				if _, err := skew.ParseVersion(r.Kubernetes); err != nil {
					return Compat{}, fmt.Errorf("compat: %s kubernetes %q: %w", a.Name, r.Kubernetes, err)
				}
			}
		case RuleMatchMinor, RuleSkewPolicy:
		default:
			return Compat{}, fmt.Errorf("compat: %s: unknown rule %q (want releases, matchMinor, kubeadm or skewPolicy)", a.Name, a.Rule)
		}
	}
	return c, nil
}

// Lookup returns the addon's rule.
func (c Compat) Lookup(name string) (CompatAddon, bool) {
	for _, a := range c.Addons {
		if a.Name == name {
			return a, true
		}
	}
	return CompatAddon{}, false
}

// Judge says whether an addon at version supports the target minor.
func (c Compat) Judge(name, version string, target skew.Version) (Status, string) {
	a, ok := c.Lookup(name)
	if !ok {
		msg := fmt.Sprintf("%s is not in the compatibility table (data from %s): check its release notes for %s", name, c.DataDate, target.MinorString())
		if name == "nvidia-dra-driver" {
			// The API versions a DRA driver writes its ResourceSlices
			// through are in their managedFields, which the removed-apis
			// gate reads (pkg/deprecations' object writers).
			msg += "; the resource.k8s.io version its ResourceSlices are written through is judged by the removed-apis gate"
		}
		return StatusUnknown, msg
	}
	v, err := skew.ParseVersion(version)
	if err != nil {
		return StatusUnknown, fmt.Sprintf("%s version %q does not parse", name, version)
	}
	t := target.MinorOnly()
	switch a.Rule {
	case RuleMatchMinor:
		if v.MinorOnly().MinorsAfter(t) == 0 {
			return StatusPass, fmt.Sprintf("%s %s matches %s (%s)", name, v.MinorString(), t.MinorString(), a.Source)
		}
		return StatusWarn, fmt.Sprintf("%s %s is released for Kubernetes %s only: move it to %s.x with the control plane (%s)", name, v.MinorString(), v.MinorString(), t.MinorString(), a.Source)
	case RuleSkewPolicy:
		behind := t.MinorsAfter(v.MinorOnly())
		lim := skew.KubeletMaxSkew(v)
		switch {
		case behind < 0:
			return StatusFail, fmt.Sprintf("%s %s is newer than the target %s (%s)", name, v.MinorString(), t.MinorString(), a.Source)
		case behind > lim:
			return StatusFail, fmt.Sprintf("%s %s is %d minors behind %s, beyond the limit of %d: upgrade it first (%s)", name, v.MinorString(), behind, t.MinorString(), lim, a.Source)
		}
		return StatusPass, fmt.Sprintf("%s %s is within %d minors of %s (%s)", name, v.MinorString(), lim, t.MinorString(), a.Source)
	case RuleKubeadm:
		for _, r := range a.Releases {
			k, _ := skew.ParseVersion(r.Kubernetes)
			if k.MinorsAfter(t) != 0 {
				continue
			}
			want, _ := skew.ParseVersion(r.Version)
			if v.Compare(want) >= 0 {
				return StatusPass, fmt.Sprintf("%s %s is at or above %s, what kubeadm installs with %s (%s)", name, v, r.Version, t.MinorString(), a.Source)
			}
			return StatusWarn, fmt.Sprintf("kubeadm installs %s %s with %s; %s is older and moves during `kubeadm upgrade apply` (%s)", name, r.Version, t.MinorString(), v, a.Source)
		}
		return StatusUnknown, fmt.Sprintf("the compatibility table has no %s row for %s (data from %s)", name, t.MinorString(), c.DataDate)
	}
	var newer []string
	for _, r := range a.Releases {
		rv, _ := skew.ParseVersion(r.Version)
		from, _ := skew.ParseVersion(r.From)
		to, _ := skew.ParseVersion(r.To)
		in := t.MinorsAfter(from) >= 0 && to.MinorsAfter(t) >= 0
		if rv.MinorOnly().MinorsAfter(v.MinorOnly()) == 0 {
			if in {
				return StatusPass, fmt.Sprintf("%s %s supports Kubernetes %s..%s (%s)", name, v.MinorString(), r.From, r.To, a.Source)
			}
			msg := fmt.Sprintf("%s %s supports Kubernetes %s..%s, not %s", name, v.MinorString(), r.From, r.To, t.MinorString())
			for _, o := range a.Releases {
				of, _ := skew.ParseVersion(o.From)
				ot, _ := skew.ParseVersion(o.To)
				if t.MinorsAfter(of) >= 0 && ot.MinorsAfter(t) >= 0 {
					newer = append(newer, o.Version)
				}
			}
			if len(newer) > 0 {
				msg += ": upgrade it to " + strings.Join(newer, " or ") + " first"
			} else {
				msg += ": no release in the table supports it yet"
			}
			return StatusFail, msg + " (" + a.Source + ")"
		}
	}
	return StatusUnknown, fmt.Sprintf("the compatibility table has no row for %s %s (data from %s, %s)", name, v.MinorString(), c.DataDate, a.Source)
}
