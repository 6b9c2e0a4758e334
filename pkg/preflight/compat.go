package preflight

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

//go:embed compat.yaml
var embeddedCompat []byte

// Compatibility rules of a CompatAddon.
const (
	// RuleReleases: each release row supports the Kubernetes minors
	// from..to (to empty: the project states only a lower bound).
	RuleReleases = "releases"
	// RuleMatchMinor: the addon's minor must equal Kubernetes'.
	RuleMatchMinor = "matchMinor"
	// RuleKubeadm: the addon version kubeadm installs with each minor.
	RuleKubeadm = "kubeadm"
	// RuleSkewPolicy: the upstream version-skew policy (kube-proxy).
	RuleSkewPolicy = "skewPolicy"
	// RuleOldestRecommended: per Kubernetes minor, the oldest addon
	// release the project recommends.
	RuleOldestRecommended = "oldestRecommended"
	// RuleNoPublishedRange: the project publishes no Kubernetes range;
	// the addon is UNKNOWN with the command to check by hand.
	RuleNoPublishedRange = "noPublishedRange"
)

// What a Kubernetes minor outside a release's range means (CompatAddon.Outside).
const (
	// OutsideFail: the project supports the listed minors only (default).
	OutsideFail = "fail"
	// OutsideWarn: the project lists what it tests and says other minors
	// may work.
	OutsideWarn = "warn"
)

// StaleAfter is the age of the table's data past which the addons gate
// warns that newer addon releases may be missing.
const StaleAfter = 120 * 24 * time.Hour

// Compat is the addon compatibility table: which addon releases support
// which Kubernetes minors, each addon with the page it came from.
type Compat struct {
	// DataDate is the date the data stands for (YYYY-MM-DD): the newest
	// revision of the sources its rows were read at, not the day they
	// were read, so that the staleness warning counts from what the rows
	// can know. No row's Revised is later.
	DataDate string        `json:"dataDate"`
	Addons   []CompatAddon `json:"addons"`
}

// CompatAddon is one addon's compatibility rule.
type CompatAddon struct {
	// Name is the addon as the inventory names it.
	Name string `json:"name"`
	// Rule is releases, matchMinor, kubeadm, skewPolicy, oldestRecommended
	// or noPublishedRange.
	Rule string `json:"rule"`
	// Source is the upstream page that states the rule.
	Source string `json:"source"`
	// Read is the date the source was read (YYYY-MM-DD).
	Read string `json:"read,omitempty"`
	// Revised is the date of the newest revision of the source that was
	// read (YYYY-MM-DD), where it has one: releases after it are not in
	// the row, whatever the day it was read.
	Revised string `json:"revised,omitempty"`
	// Checked says what was read, where, and at which revision.
	Checked string `json:"checked,omitempty"`
	// Note says what the rule leaves out: where the vendor's pages
	// disagree (the stricter is kept) or what it states instead of a range.
	Note string `json:"note,omitempty"`
	// Outside is fail (default) or warn: a minor outside a release's range.
	Outside string `json:"outside,omitempty"`
	// Check is the command that shows the upstream statement, for a human
	// to check by hand when the table cannot answer. {version} is the
	// version found, {semver} it as MAJOR.MINOR.PATCH, {minor} as
	// MAJOR.MINOR and {target} the target minor.
	Check string `json:"check,omitempty"`
	// Releases are the rows of a releases, kubeadm or oldestRecommended rule.
	Releases []CompatRelease `json:"releases,omitempty"`
}

// CompatRelease is one row: an addon release and the Kubernetes minors it
// supports (releases), or the addon version that goes with a Kubernetes
// minor (kubeadm, oldestRecommended).
type CompatRelease struct {
	// Version is the addon's MAJOR.MINOR, or MAJOR.MINOR.PATCH for a row
	// that holds from that patch on (releases); the full version (kubeadm,
	// oldestRecommended).
	Version string `json:"version"`
	// From and To bound the supported Kubernetes minors (releases); an
	// empty To is no stated upper bound.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Kubernetes is the minor the row is for (kubeadm, oldestRecommended).
	Kubernetes string `json:"kubernetes,omitempty"`
	// Note qualifies the row (a contradiction resolved, a stated exception).
	Note string `json:"note,omitempty"`
	// Columns are the columns of the project's support table the row
	// comes from, where the table has one per platform (the GPU
	// Operator's Kubernetes column for clusters of one's own, its Amazon
	// EKS, Google GKE and AKS columns, its RKE2 and K3s columns): a row
	// applies to clusters of those platforms only (ColumnOf). Empty: one
	// range for every platform.
	Columns []string `json:"columns,omitempty"`
}

// Columns of a support table a release row may come from.
const (
	// ColumnKubernetes is the upstream Kubernetes column, for clusters
	// run with kubeadm, Cluster API and other installers of one's own.
	ColumnKubernetes = "kubernetes"
	ColumnEKS        = "eks"
	ColumnGKE        = "gke"
	ColumnAKS        = "aks"
	ColumnRKE2       = "rke2"
	ColumnK3s        = "k3s"
)

var columns = map[string]bool{ColumnKubernetes: true, ColumnEKS: true, ColumnGKE: true, ColumnAKS: true, ColumnRKE2: true, ColumnK3s: true}

// ColumnOf is the column of a support table that applies to a provider's
// clusters: its own where the table has one, the Kubernetes column for
// kubeadm, Cluster API and unknown installers.
func ColumnOf(p skew.Provider) string {
	switch p {
	case skew.ProviderEKS:
		return ColumnEKS
	case skew.ProviderGKE:
		return ColumnGKE
	case skew.ProviderAKS:
		return ColumnAKS
	case skew.ProviderRKE2:
		return ColumnRKE2
	case skew.ProviderK3s:
		return ColumnK3s
	}
	return ColumnKubernetes
}

// forColumn keeps the rows for column: the rows that name it, else (a
// release whose table has no such column) the Kubernetes column's, and the
// rows that name none; each row kept from a column says which in its note.
func (a CompatAddon) forColumn(column string) CompatAddon {
	has := func(r CompatRelease, c string) bool {
		for _, x := range r.Columns {
			if x == c {
				return true
			}
		}
		return false
	}
	named := map[string]bool{} // release versions that have a row for column
	for _, r := range a.Releases {
		if has(r, column) {
			named[r.Version] = true
		}
	}
	out := a
	out.Releases = nil
	for _, r := range a.Releases {
		used := ""
		switch {
		case len(r.Columns) == 0:
		case has(r, column):
			used = column
		case !named[r.Version] && has(r, ColumnKubernetes):
			used = ColumnKubernetes
		default:
			continue
		}
		if used != "" {
			r.Note = strings.TrimPrefix(r.Note+"; ", "; ") + "the " + columnTitle(used) + " column"
		}
		out.Releases = append(out.Releases, r)
	}
	return out
}

// Verdict is the table's answer for one addon against a target.
type Verdict struct {
	Status  Status
	Message string
	// Check is the command to check by hand (UNKNOWN), "" when the table
	// has none for the addon.
	Check string
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

const dateLayout = "2006-01-02"

// ParseCompat reads a table in YAML or JSON and checks it.
func ParseCompat(data []byte) (Compat, error) {
	var c Compat
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Compat{}, fmt.Errorf("compat: %w", err)
	}
	if _, err := time.Parse(dateLayout, c.DataDate); err != nil {
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
		if err := a.validate(); err != nil {
			return Compat{}, fmt.Errorf("compat: %s: %w", a.Name, err)
		}
		if a.Revised != "" && a.Revised > c.DataDate {
			return Compat{}, fmt.Errorf("compat: %s: revised %s is after dataDate %s: dataDate is the newest source revision read", a.Name, a.Revised, c.DataDate)
		}
	}
	return c, nil
}

func (a CompatAddon) validate() error {
	if strings.TrimSpace(a.Source) == "" {
		return fmt.Errorf("names no source page")
	}
	if a.Read != "" {
		if _, err := time.Parse(dateLayout, a.Read); err != nil {
			return fmt.Errorf("read %q: want YYYY-MM-DD", a.Read)
		}
	}
	if a.Revised != "" {
		if _, err := time.Parse(dateLayout, a.Revised); err != nil {
			return fmt.Errorf("revised %q: want YYYY-MM-DD", a.Revised)
		}
	}
	switch a.Outside {
	case "", OutsideFail, OutsideWarn:
	default:
		return fmt.Errorf("outside %q: want fail or warn", a.Outside)
	}
	switch a.Rule {
	case RuleReleases:
		for _, r := range a.Releases {
			if _, err := skew.ParseVersion(r.Version); err != nil {
				return fmt.Errorf("release %q: %w", r.Version, err)
			}
			from, err := skew.ParseVersion(r.From)
			if err != nil || from.HasPatch {
				return fmt.Errorf("release %s: from %q: want MAJOR.MINOR", r.Version, r.From)
			}
			for _, c := range r.Columns {
				if !columns[c] {
					return fmt.Errorf("release %s: column %q: want kubernetes, eks, gke, aks, rke2 or k3s", r.Version, c)
				}
			}
			if r.To == "" {
				continue
			}
			to, err := skew.ParseVersion(r.To)
			if err != nil || to.HasPatch || to.MinorsAfter(from) < 0 {
				return fmt.Errorf("release %s: want from <= to as MAJOR.MINOR, got %q..%q", r.Version, r.From, r.To)
			}
		}
	case RuleKubeadm, RuleOldestRecommended:
		for _, r := range a.Releases {
			if _, err := skew.ParseVersion(r.Version); err != nil {
				return fmt.Errorf("version %q: %w", r.Version, err)
			}
			if _, err := skew.ParseVersion(r.Kubernetes); err != nil {
				return fmt.Errorf("kubernetes %q: %w", r.Kubernetes, err)
			}
		}
	case RuleNoPublishedRange:
		if strings.TrimSpace(a.Check) == "" {
			return fmt.Errorf("rule noPublishedRange needs the command to check by hand (check)")
		}
		if len(a.Releases) > 0 {
			return fmt.Errorf("rule noPublishedRange has no release rows")
		}
	case RuleMatchMinor, RuleSkewPolicy:
	default:
		return fmt.Errorf("unknown rule %q (want releases, matchMinor, kubeadm, skewPolicy, oldestRecommended or noPublishedRange)", a.Rule)
	}
	return nil
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

// Age is how old the table's data is at now (0 when dataDate is unset).
func (c Compat) Age(now time.Time) time.Duration {
	d, err := time.Parse(dateLayout, c.DataDate)
	if err != nil {
		return 0
	}
	return now.Sub(d)
}

// Stale reports whether the data is older than StaleAfter at now.
func (c Compat) Stale(now time.Time) bool { return c.Age(now) > StaleAfter }

// Judge says whether an addon at version supports the target minor on a
// cluster of one's own (the Kubernetes column where a table has columns).
func (c Compat) Judge(name, version string, target skew.Version) Verdict {
	return c.JudgeOn(name, version, target, ColumnKubernetes)
}

// JudgeOn says whether an addon at version supports the target minor on
// clusters of a platform's column (ColumnOf).
func (c Compat) JudgeOn(name, version string, target skew.Version, column string) Verdict {
	a, ok := c.Lookup(name)
	if ok {
		a = a.forColumn(column)
	}
	return c.judge(a, ok, name, version, target)
}

func columnTitle(c string) string {
	switch c {
	case ColumnKubernetes:
		return "Kubernetes"
	case ColumnEKS:
		return "Amazon EKS"
	case ColumnGKE:
		return "Google GKE"
	case ColumnAKS:
		return "AKS"
	case ColumnRKE2:
		return "RKE2"
	case ColumnK3s:
		return "K3s"
	}
	return c
}

func (c Compat) judge(a CompatAddon, ok bool, name, version string, target skew.Version) Verdict {
	if !ok {
		return Verdict{Status: StatusUnknown, Message: fmt.Sprintf("%s is not in the compatibility table (data from %s): check its release notes for %s", name, c.DataDate, target.MinorString())}
	}
	t := target.MinorOnly()
	v, err := skew.ParseVersion(version)
	if a.Rule == RuleNoPublishedRange {
		msg := fmt.Sprintf("%s publishes no supported Kubernetes range", name)
		if a.Note != "" {
			msg += ": " + a.Note
		}
		return Verdict{Status: StatusUnknown, Message: msg + " (" + a.Source + ")", Check: a.check(version, v, err == nil, t)}
	}
	if err != nil {
		what := fmt.Sprintf("%q does not parse", version)
		if version == "" {
			what = "is not in its image tag (pinned by digest alone?)"
		}
		return Verdict{Status: StatusUnknown, Message: fmt.Sprintf("%s version %s: read it from the workload or its Helm release and compare with %s", name, what, a.Source)}
	}
	check := a.check(version, v, true, t)
	switch a.Rule {
	case RuleMatchMinor:
		if v.MinorOnly().MinorsAfter(t) == 0 {
			return Verdict{Status: StatusPass, Message: fmt.Sprintf("%s %s matches %s (%s)", name, v.MinorString(), t.MinorString(), a.Source)}
		}
		return Verdict{Status: StatusWarn, Message: fmt.Sprintf("%s %s is released for Kubernetes %s only: move it to %s.x with the control plane (%s)", name, v.MinorString(), v.MinorString(), t.MinorString(), a.Source)}
	case RuleSkewPolicy:
		behind := t.MinorsAfter(v.MinorOnly())
		lim := skew.KubeletMaxSkew(v)
		switch {
		case behind < 0:
			return Verdict{Status: StatusFail, Message: fmt.Sprintf("%s %s is newer than the target %s (%s)", name, v.MinorString(), t.MinorString(), a.Source)}
		case behind > lim:
			return Verdict{Status: StatusFail, Message: fmt.Sprintf("%s %s is %s behind %s, beyond the limit of %d: upgrade it first (%s)", name, v.MinorString(), skew.Minors(behind), t.MinorString(), lim, a.Source)}
		}
		return Verdict{Status: StatusPass, Message: fmt.Sprintf("%s %s is within %s of %s (%s)", name, v.MinorString(), skew.Minors(lim), t.MinorString(), a.Source)}
	case RuleKubeadm, RuleOldestRecommended:
		return a.judgePerMinor(c.DataDate, v, t, check)
	}
	return a.judgeReleases(c.DataDate, v, t, check)
}

// judgePerMinor judges kubeadm and oldestRecommended: the row for the
// target minor names the oldest fitting addon version.
func (a CompatAddon) judgePerMinor(dataDate string, v, t skew.Version, check string) Verdict {
	for _, r := range a.Releases {
		if k, _ := skew.ParseVersion(r.Kubernetes); k.MinorsAfter(t) != 0 {
			continue
		}
		want, _ := skew.ParseVersion(r.Version)
		switch {
		case a.Rule == RuleKubeadm && v.Compare(want) >= 0:
			return Verdict{Status: StatusPass, Message: fmt.Sprintf("%s %s is at or above %s, what kubeadm installs with %s (%s)", a.Name, v, r.Version, t.MinorString(), a.Source)}
		case a.Rule == RuleKubeadm:
			return Verdict{Status: StatusWarn, Message: fmt.Sprintf("kubeadm installs %s %s with %s; %s is older and moves during `kubeadm upgrade apply` (%s)", a.Name, r.Version, t.MinorString(), v, a.Source)}
		case v.Compare(want) >= 0:
			return Verdict{Status: StatusPass, Message: fmt.Sprintf("%s %s is at or above %s, the oldest release upstream recommends for Kubernetes %s (%s)", a.Name, v, r.Version, t.MinorString(), a.Source)}
		}
		return Verdict{Status: StatusWarn, Message: fmt.Sprintf("%s %s is older than %s, the oldest release upstream recommends for Kubernetes %s: upgrade it first (%s)", a.Name, v, r.Version, t.MinorString(), a.Source)}
	}
	return Verdict{Status: StatusUnknown, Check: check,
		Message: fmt.Sprintf("the compatibility table has no %s row for Kubernetes %s (data from %s, %s)", a.Name, t.MinorString(), dataDate, a.Source)}
}

// judgeReleases judges the releases rule. A row with a patch version (a
// range that changed within a minor, Karpenter 1.0.5) holds from that
// patch on; the most specific row at or below v is v's.
func (a CompatAddon) judgeReleases(dataDate string, v, t skew.Version, check string) Verdict {
	var row *CompatRelease
	var rowV skew.Version
	for i, r := range a.Releases {
		rv, _ := skew.ParseVersion(r.Version)
		if rv.MinorOnly().MinorsAfter(v.MinorOnly()) != 0 || (rv.HasPatch && rv.Compare(v) > 0) {
			continue
		}
		if row == nil || rv.Compare(rowV) > 0 {
			row, rowV = &a.Releases[i], rv
		}
	}
	if row == nil {
		return Verdict{Status: StatusUnknown, Check: check,
			Message: fmt.Sprintf("the compatibility table has no row for %s %s (data from %s, %s)", a.Name, v.MinorString(), dataDate, a.Source)}
	}
	rel := rowV.MinorString()
	if rowV.HasPatch {
		rel = strings.TrimPrefix(rowV.String(), "v") + "+"
	}
	span := row.From + ".." + row.To
	if row.To == "" {
		span = row.From + " or newer (no upper bound stated)"
	}
	note := ""
	if row.Note != "" {
		note = "; " + row.Note
	}
	if supports(*row, t) {
		return Verdict{Status: StatusPass, Message: fmt.Sprintf("%s %s supports Kubernetes %s (%s)%s", a.Name, rel, span, a.Source, note)}
	}
	st, verb := StatusFail, "supports"
	if a.Outside == OutsideWarn {
		st, verb = StatusWarn, "is tested with"
	}
	msg := fmt.Sprintf("%s %s %s Kubernetes %s, not %s", a.Name, rel, verb, span, t.MinorString())
	// Above the range, the releases to move to are newer ones; below it
	// (a target older than the release supports), older ones.
	from, _ := skew.ParseVersion(row.From)
	above := t.MinorsAfter(from) >= 0
	var fit []string
	for _, o := range a.Releases {
		ov, _ := skew.ParseVersion(o.Version)
		if supports(o, t) && (ov.Compare(v) > 0) == above {
			fit = append(fit, o.Version)
		}
	}
	switch {
	case len(fit) > 0 && above:
		msg += ": upgrade it to " + strings.Join(fit, " or ") + " first"
	case len(fit) > 0:
		msg += ": the target is older than this release supports; " + strings.Join(fit, ", ") + " support it"
	case !above:
		msg += ": the target is older than this release supports"
	default:
		msg += fmt.Sprintf(": no release in the table (data from %s) supports %s; look for a newer one", dataDate, t.MinorString())
	}
	if a.Outside == OutsideWarn {
		msg += " (upstream says other minors may work but are not tested)"
	}
	return Verdict{Status: st, Message: msg + " (" + a.Source + ")" + note}
}

// supports reports whether a release row covers the minor t.
func supports(r CompatRelease, t skew.Version) bool {
	from, err := skew.ParseVersion(r.From)
	if err != nil || t.MinorsAfter(from) < 0 {
		return false
	}
	if r.To == "" {
		return true
	}
	to, err := skew.ParseVersion(r.To)
	return err == nil && to.MinorsAfter(t) >= 0
}

// check fills the addon's command to check by hand.
func (a CompatAddon) check(raw string, v skew.Version, parsed bool, t skew.Version) string {
	if a.Check == "" {
		return ""
	}
	if !parsed && (strings.Contains(a.Check, "{semver}") || strings.Contains(a.Check, "{minor}") || strings.Contains(a.Check, "{version}")) {
		return ""
	}
	return strings.NewReplacer(
		"{version}", raw,
		"{semver}", strconv.Itoa(v.Major)+"."+strconv.Itoa(v.Minor)+"."+strconv.Itoa(v.Patch),
		"{minor}", v.MinorString(),
		"{target}", t.MinorString(),
	).Replace(a.Check)
}
