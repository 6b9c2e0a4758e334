package skew

import (
	_ "embed"
	"fmt"
	"sort"
	"time"

	"sigs.k8s.io/yaml"
)

//go:embed patches.json
var embeddedPatches []byte

// PatchTable is the newest patch release of each minor, dated, with its
// source. It is a data file of its own (patches.json, overridden by
// --patches) beside the release calendar, which carries it.
type PatchTable struct {
	// DataDate is when the table was compiled (YYYY-MM-DD).
	DataDate string `json:"dataDate"`
	// Source says where the rows came from.
	Source string `json:"source,omitempty"`
	// Minors holds one row per minor.
	Minors []LatestPatch `json:"minors"`
}

// LatestPatch is the newest patch release of one minor that the data
// knows of.
type LatestPatch struct {
	// Minor is MAJOR.MINOR ("1.37").
	Minor string `json:"minor"`
	// Version is the patch release ("1.37.2").
	Version string `json:"version"`
	// Released is its release date (YYYY-MM-DD).
	Released string `json:"released"`
	// AsOf is the date up to which Version is known to be the newest
	// patch of the minor; it defaults to the table's dataDate. A newer
	// patch may have come out after it.
	AsOf string `json:"asOf,omitempty"`
	// Final says the minor is past end of life and Version was its last
	// patch: no newer one will come.
	Final bool `json:"final,omitempty"`

	minor    Version
	version  Version
	released time.Time
	asOf     time.Time
}

// DefaultPatches returns the embedded table.
func DefaultPatches() PatchTable {
	p, err := ParsePatches(embeddedPatches)
	if err != nil {
		return PatchTable{}
	}
	return p
}

// ParsePatches reads a patch table in JSON or YAML and checks it.
func ParsePatches(data []byte) (PatchTable, error) {
	var p PatchTable
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return PatchTable{}, fmt.Errorf("patches: %w", err)
	}
	dataDate, err := time.Parse(dateLayout, p.DataDate)
	if err != nil {
		return PatchTable{}, fmt.Errorf("patches: dataDate %q: want YYYY-MM-DD", p.DataDate)
	}
	if len(p.Minors) == 0 {
		return PatchTable{}, fmt.Errorf("patches: no minors")
	}
	seen := map[string]bool{}
	for i := range p.Minors {
		r := &p.Minors[i]
		m, err := ParseVersion(r.Minor)
		if err != nil {
			return PatchTable{}, fmt.Errorf("patches: minors[%d].minor: %w", i, err)
		}
		r.minor = m.MinorOnly()
		key := r.minor.MinorString()
		if seen[key] {
			return PatchTable{}, fmt.Errorf("patches: minor %s listed twice", key)
		}
		seen[key] = true
		if r.version, err = ParseVersion(r.Version); err != nil || !r.version.HasPatch || r.version.Pre != "" || r.version.Build != "" {
			return PatchTable{}, fmt.Errorf("patches: %s version %q: want MAJOR.MINOR.PATCH", key, r.Version)
		}
		if r.version.MinorsAfter(r.minor) != 0 {
			return PatchTable{}, fmt.Errorf("patches: %s version %s is of another minor", key, r.Version)
		}
		if r.released, err = time.Parse(dateLayout, r.Released); err != nil {
			return PatchTable{}, fmt.Errorf("patches: %s released %q: want YYYY-MM-DD", key, r.Released)
		}
		r.asOf = dataDate
		if r.AsOf != "" {
			if r.asOf, err = time.Parse(dateLayout, r.AsOf); err != nil {
				return PatchTable{}, fmt.Errorf("patches: %s asOf %q: want YYYY-MM-DD", key, r.AsOf)
			}
		}
		if r.asOf.Before(r.released) {
			return PatchTable{}, fmt.Errorf("patches: %s asOf %s is before its release on %s", key, r.asOf.Format(dateLayout), r.Released)
		}
		if r.asOf.After(dataDate) {
			return PatchTable{}, fmt.Errorf("patches: %s asOf %s is after the table's dataDate %s", key, r.asOf.Format(dateLayout), p.DataDate)
		}
	}
	sort.Slice(p.Minors, func(i, j int) bool { return p.Minors[i].minor.MinorsAfter(p.Minors[j].minor) < 0 })
	return p, nil
}

// WithPatches returns the calendar carrying another patch table.
func (c Calendar) WithPatches(p PatchTable) Calendar {
	c.Patches = p
	return c
}

// LatestPatch returns the newest patch of v's minor that the data knows.
func (c Calendar) LatestPatch(v Version) (LatestPatch, bool) {
	for _, r := range c.Patches.Minors {
		if r.minor.MinorsAfter(v) == 0 {
			return r, true
		}
	}
	return LatestPatch{}, false
}

// PatchLag is how far a version is behind the newest patch of its minor
// at one moment.
type PatchLag struct {
	// Version is the version judged.
	Version string `json:"version"`
	// Latest is the newest patch of its minor in the data, and Released
	// its release date; empty when the data does not know the minor.
	Latest   string `json:"latest,omitempty"`
	Released string `json:"released,omitempty"`
	// AsOf is the date up to which Latest is known to be the newest.
	AsOf string `json:"asOf,omitempty"`
	// Final says no newer patch of the minor will come.
	Final bool `json:"final,omitempty"`
	// PatchesBehind is Latest's patch number less Version's.
	PatchesBehind int `json:"patchesBehind"`
	// DaysBehind is how many days a newer patch than Version has been
	// out: from the release of the first patch after Version to now. The
	// data holds only the newest patch of a minor, so unless that is the
	// very next one, the count runs from the newest patch and is a lower
	// bound.
	DaysBehind int `json:"daysBehind"`
	// AtLeast says DaysBehind or PatchesBehind is a lower bound: the
	// first patch after Version is not in the data, or the data is older
	// than now and a newer patch may have come out since (Message says
	// which).
	AtLeast bool `json:"atLeast,omitempty"`
	// DataDate is the patch table's own date.
	DataDate string `json:"dataDate"`
	// Status is ok on the newest patch, info when behind, unknown when
	// the data does not know the minor or cannot tell.
	Status Status `json:"status"`
	// Message says it in words.
	Message string `json:"message"`
}

// PatchLag returns how far v is behind the newest patch of its minor at
// now.
func (c Calendar) PatchLag(v Version, now time.Time) PatchLag {
	l := PatchLag{Version: v.String(), DataDate: c.Patches.DataDate, Status: StatusUnknown}
	r, ok := c.LatestPatch(v)
	if !ok {
		l.Message = fmt.Sprintf("the patch data (from %s) does not list %s: pass --patches with newer data", c.Patches.DataDate, v.MinorString())
		return l
	}
	today := truncDay(now)
	l.Latest, l.Released, l.AsOf, l.Final = "v"+r.Version, r.Released, r.asOf.Format(dateLayout), r.Final
	stale := !r.Final && r.asOf.Before(today)
	cur := v
	cur.Pre, cur.Build = "", ""
	if isPreRelease(v.Pre) {
		cur.Pre = v.Pre
	}
	switch cmp := cur.Compare(r.version); {
	case !v.HasPatch:
		l.Message = fmt.Sprintf("%s has no patch number; the newest patch of %s is %s", v, v.MinorString(), l.Latest)
	case r.released.After(today):
		l.Message = fmt.Sprintf("%s was released on %s, after the clock (%s)", l.Latest, r.Released, today.Format(dateLayout))
	case cmp > 0:
		l.Message = fmt.Sprintf("%s is newer than %s, the newest patch in the data (as of %s): pass --patches with newer data", v, l.Latest, l.AsOf)
	case cmp == 0 && !stale:
		l.Status = StatusOK
		l.Message = "on the newest patch release"
		if r.Final {
			l.Message = fmt.Sprintf("on %s, the last patch release of %s", l.Latest, v.MinorString())
		}
	case cmp == 0:
		l.Status = StatusUnknown
		l.AtLeast = true
		l.Message = fmt.Sprintf("on %s, the newest patch known as of %s (%d days ago): a newer one may have come out since", l.Latest, l.AsOf, days(r.asOf, today))
	default:
		l.Status = StatusInfo
		// The first patch release after v: v's own patch number when v is
		// a pre-release of it, else the next one.
		first := v.Patch + 1
		if cur.Pre != "" {
			first = v.Patch
		}
		l.PatchesBehind = r.version.Patch - first + 1
		l.DaysBehind = days(r.released, today)
		daysBound, patchesBound := "", ""
		if r.version.Patch != first {
			daysBound = "at least "
		}
		if stale {
			patchesBound = "at least "
		}
		l.AtLeast = daysBound != "" || patchesBound != ""
		l.Message = fmt.Sprintf("%s%d days and %s%s behind %s (released %s)", daysBound, l.DaysBehind, patchesBound, plural(l.PatchesBehind, "patch release"), l.Latest, r.Released)
		if stale {
			l.Message += fmt.Sprintf("; patch data as of %s", l.AsOf)
		}
	}
	return l
}

// days counts whole days from a to b.
func days(a, b time.Time) int { return int(b.Sub(a).Hours() / 24) }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
