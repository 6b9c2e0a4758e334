package apilifecycle

import (
	"sort"
	"strings"
)

// GVK names an API kind.
type GVK struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// APIVersion returns "group/version", or "version" for the core group.
func (g GVK) APIVersion() string { return JoinAPIVersion(g.Group, g.Version) }

// IsZero reports whether no kind is named.
func (g GVK) IsZero() bool { return g.Group == "" && g.Version == "" && g.Kind == "" }

// String returns "Kind.version.group" style text: "apps/v1 Deployment".
func (g GVK) String() string {
	if g.IsZero() {
		return ""
	}
	if g.Kind == "" {
		return g.APIVersion()
	}
	return g.APIVersion() + " " + g.Kind
}

// JoinAPIVersion returns "group/version", or "version" for the core group.
func JoinAPIVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// SplitAPIVersion splits "group/version" (or "v1" for the core group).
func SplitAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}

// Entry is the lifecycle of one API kind in one group version.
type Entry struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource,omitempty"`

	Introduced Release `json:"introduced,omitzero"`
	Deprecated Release `json:"deprecated,omitzero"`
	Removed    Release `json:"removed,omitzero"`

	// Replacement is the kind to migrate to, when there is one.
	Replacement GVK `json:"replacement,omitzero"`
	// ReplacementAvailable is the first release that serves Replacement.
	ReplacementAvailable Release `json:"replacementAvailable,omitzero"`

	// Component names the project whose releases Deprecated and Removed
	// count, for third-party rules ("istio", "cert-manager"); empty means
	// Kubernetes.
	Component string `json:"component,omitempty"`

	// Source says where the entry comes from: a module and version for the
	// built-in table, or a rules file.
	Source string `json:"source,omitempty"`
}

// APIVersion returns the entry's "group/version".
func (e Entry) APIVersion() string { return JoinAPIVersion(e.Group, e.Version) }

// GVK returns the entry's group, version and kind.
func (e Entry) GVK() GVK { return GVK{Group: e.Group, Version: e.Version, Kind: e.Kind} }

// Status is where an API stands at a target release.
type Status int

// Statuses, least to most severe.
const (
	// StatusOK means the API is served and not deprecated at the target.
	StatusOK Status = iota
	// StatusDeprecated means the API is deprecated at the target but still served.
	StatusDeprecated
	// StatusRemoved means the API is no longer served at the target.
	StatusRemoved
)

// String returns "ok", "deprecated" or "removed".
func (s Status) String() string {
	switch s {
	case StatusDeprecated:
		return "deprecated"
	case StatusRemoved:
		return "removed"
	}
	return "ok"
}

// MarshalText writes the status by name.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// StatusAt classifies the entry at a Kubernetes target release: removed
// when removed <= target, deprecated when deprecated <= target. Entries of
// other components are classified by Table.StatusAt.
func (e Entry) StatusAt(target Release) Status {
	switch {
	case e.Removed.AtOrBefore(target):
		return StatusRemoved
	case e.Deprecated.AtOrBefore(target):
		return StatusDeprecated
	}
	return StatusOK
}

// StatusAt classifies e at the Kubernetes target, or, for an entry of
// another component, at that component's target from the rules files. With
// no target for its component, a third-party entry that has a deprecation
// is reported as deprecated: the installed version is unknown.
func (t *Table) StatusAt(e Entry, target Release) Status {
	if e.Component == "" {
		return e.StatusAt(target)
	}
	if ct, ok := t.targets[e.Component]; ok {
		return e.StatusAt(ct)
	}
	if !e.Deprecated.IsZero() || !e.Removed.IsZero() {
		return StatusDeprecated
	}
	return StatusOK
}

type gvkKey struct{ group, version, kind string }

type gvrKey struct{ group, version, resource string }

// Table is an immutable, indexed set of entries. Lookups are by exact
// group, version and kind, or by resource.
type Table struct {
	entries []Entry
	byGVK   map[gvkKey]int
	byGVR   map[gvrKey]int
	groups  map[string]bool
	targets map[string]Release
}

// NewTable indexes entries. A later entry for the same group, version and
// kind replaces an earlier one, so rules files can correct the built-in data.
func NewTable(entries ...[]Entry) *Table {
	t := &Table{byGVK: map[gvkKey]int{}, byGVR: map[gvrKey]int{}, groups: map[string]bool{}, targets: map[string]Release{}}
	for _, list := range entries {
		for _, e := range list {
			k := gvkKey{e.Group, e.Version, e.Kind}
			if i, ok := t.byGVK[k]; ok {
				t.entries[i] = e
				continue
			}
			t.byGVK[k] = len(t.entries)
			t.entries = append(t.entries, e)
		}
	}
	sort.SliceStable(t.entries, func(i, j int) bool { return less(t.entries[i], t.entries[j]) })
	for i, e := range t.entries {
		t.byGVK[gvkKey{e.Group, e.Version, e.Kind}] = i
		if e.Resource != "" {
			k := gvrKey{e.Group, e.Version, e.Resource}
			if _, ok := t.byGVR[k]; !ok {
				t.byGVR[k] = i
			}
		}
		t.groups[e.Group] = true
	}
	return t
}

func less(a, b Entry) bool {
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.Version != b.Version {
		return a.Version < b.Version
	}
	return a.Kind < b.Kind
}

var builtinTable = NewTable(builtinEntries())

// BuiltinSource names the module and version the built-in table follows,
// such as "k8s.io/api@v0.37.2".
func BuiltinSource() string { return builtinSource }

// Builtin returns the generated table for the pinned Kubernetes release.
func Builtin() *Table { return builtinTable }

// With returns a new table holding t's entries overridden and extended by
// the rules.
func (t *Table) With(r Rules) *Table {
	if len(r.Entries) == 0 && len(r.ComponentTargets) == 0 {
		return t
	}
	n := NewTable(t.entries, r.Entries)
	for c, v := range t.targets {
		n.targets[c] = v
	}
	for c, v := range r.ComponentTargets {
		n.targets[c] = v
	}
	return n
}

// Entries returns a copy of the entries, sorted by group, version and kind.
func (t *Table) Entries() []Entry { return append([]Entry(nil), t.entries...) }

// Len returns the number of entries.
func (t *Table) Len() int { return len(t.entries) }

// Lookup finds the entry for an apiVersion ("group/version") and kind.
func (t *Table) Lookup(apiVersion, kind string) (Entry, bool) {
	g, v := SplitAPIVersion(apiVersion)
	return t.LookupGVK(g, v, kind)
}

// LookupGVK finds the entry for a group, version and kind.
func (t *Table) LookupGVK(group, version, kind string) (Entry, bool) {
	i, ok := t.byGVK[gvkKey{group, version, kind}]
	if !ok {
		// Rules may cover a whole group version with an empty kind.
		if i, ok = t.byGVK[gvkKey{group, version, ""}]; !ok {
			return Entry{}, false
		}
		e := t.entries[i]
		e.Kind = kind
		return e, true
	}
	return t.entries[i], true
}

// LookupResource finds the entry for a group, version and resource
// (plural, lower case), as the apiserver metric and audit events name them.
func (t *Table) LookupResource(group, version, resource string) (Entry, bool) {
	i, ok := t.byGVR[gvrKey{group, version, resource}]
	if !ok {
		return Entry{}, false
	}
	return t.entries[i], true
}

// HasGroup reports whether any entry is in the group.
func (t *Table) HasGroup(group string) bool { return t.groups[group] }

// InWindow returns the entries deprecated or removed at target, sorted.
func (t *Table) InWindow(target Release) []Entry {
	var out []Entry
	for _, e := range t.entries {
		if t.StatusAt(e, target) != StatusOK {
			out = append(out, e)
		}
	}
	return out
}
