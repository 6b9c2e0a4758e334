package deprecations

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Source names where a finding comes from.
type Source string

// Sources, in the order of how much they can be trusted to show what
// clients really call.
const (
	SourceMetrics   Source = "metrics"
	SourceAudit     Source = "audit"
	SourceObjects   Source = "objects"
	SourceHelm      Source = "helm"
	SourceManifests Source = "manifests"
	SourceCRDs      Source = "crds"
)

// AllSources lists every source.
var AllSources = []Source{SourceMetrics, SourceAudit, SourceObjects, SourceHelm, SourceManifests, SourceCRDs}

// Status is a finding's state at the target release: its API is removed
// there, deprecated there, or cannot be told (Undeterminable). The table's
// STATUS column and -o json|yaml write it in the suite's words (Word): a
// removed API fails the upgrade, a deprecated one warns.
type Status string

// Status of a finding at the target release.
const (
	StatusRemoved    Status = "removed"
	StatusDeprecated Status = "deprecated"
	// StatusUnknown marks a finding whose apiVersion could not be
	// determined (a templated apiVersion in an unrendered chart).
	StatusUnknown Status = "unknown"
)

// Statuses are the words Word returns, for a command's legend.
var Statuses = []cli.Status{cli.StatusWarn, cli.StatusUnknown, cli.StatusFail}

// Word is the status in the suite's vocabulary: FAIL for an API removed at
// the target (the upgrade breaks its users), WARN for a deprecated one,
// UNKNOWN for an apiVersion that could not be read.
func (s Status) Word() cli.Status {
	switch s {
	case StatusRemoved:
		return cli.StatusFail
	case StatusDeprecated:
		return cli.StatusWarn
	}
	return cli.StatusUnknown
}

// MarshalText writes the status as -o json and -o yaml do from
// gpufleet.dev/v1alpha2 on: its table word in lower case ("fail", "warn",
// "unknown").
func (s Status) MarshalText() ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	return []byte(s.Word().JSONWord()), nil
}

// UnmarshalText reads a status as MarshalText writes it, or as reports of
// gpufleet.dev/v1alpha1 did ("removed", "deprecated", "unknown").
func (s *Status) UnmarshalText(b []byte) error {
	w := string(b)
	for _, st := range []Status{StatusRemoved, StatusDeprecated, StatusUnknown} {
		if w == string(st) || w == st.Word().JSONWord() {
			*s = st
			return nil
		}
	}
	if w == "" {
		*s = ""
		return nil
	}
	return fmt.Errorf("status %q is not one of fail, warn, unknown", w)
}

// Finding is one use of a deprecated or removed API.
type Finding struct {
	Source Source `json:"source"`
	// Location is where the use was seen: file:line, namespace/name of an
	// object, a Helm release, or the apiserver instance.
	Location string `json:"location"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`

	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`

	// Who wrote or called: a user, field manager or Helm release.
	Who       string    `json:"who,omitempty"`
	UserAgent string    `json:"userAgent,omitempty"`
	Verb      string    `json:"verb,omitempty"`
	Count     int64     `json:"count,omitempty"`
	FirstSeen time.Time `json:"firstSeen,omitzero"`
	LastSeen  time.Time `json:"lastSeen,omitzero"`
	Detail    string    `json:"detail,omitempty"`

	// Undeterminable is set when the apiVersion could not be read (for
	// example a templated apiVersion); Candidates then lists the deprecated
	// or removed versions the kind has.
	Undeterminable bool     `json:"undeterminable,omitempty"`
	Candidates     []string `json:"candidates,omitempty"`

	// Filled in by Classify.
	Status               Status               `json:"status"`
	Deprecated           apilifecycle.Release `json:"deprecated,omitzero"`
	Removed              apilifecycle.Release `json:"removed,omitzero"`
	Replacement          string               `json:"replacement,omitempty"`
	ReplacementAvailable apilifecycle.Release `json:"replacementAvailable,omitzero"`
	// ReplacementServed says whether the current server already serves the
	// replacement (nil when unknown, for example for files alone).
	ReplacementServed *bool `json:"replacementServed,omitempty"`
	// Hint is the command that helps.
	Hint string `json:"hint,omitempty"`

	// server is what the apiserver itself said (metric label, audit
	// annotation, CRD deprecation), used when the table has no entry.
	server *serverLifecycle
}

// serverLifecycle is what the apiserver reported about an API.
type serverLifecycle struct {
	removed string
	// notServed marks a version the server no longer serves.
	notServed bool
}

// Skipped is input that was not scanned, or only partly: a file that does
// not parse, an unrendered template, a corrupt Helm record, an audit line
// that is not JSON.
type Skipped struct {
	Source Source `json:"source"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	// Partial is set when the input was scanned line by line only.
	Partial bool   `json:"partial,omitempty"`
	Reason  string `json:"reason"`
	Hint    string `json:"hint,omitempty"`
}

// Location formats file:line.
func fileLine(file string, line int) string {
	if line > 0 {
		return file + ":" + strconv.Itoa(line)
	}
	return file
}

// Target is the release findings are judged against, and what the current
// server serves (nil for files alone).
type Target struct {
	Release apilifecycle.Release
	// Served reports whether the server serves a group version; nil when
	// there is no server.
	Served func(groupVersion, kind string) bool
}

// Classify judges findings at the target with the table: it fills in the
// lifecycle fields and status, and drops findings whose API is neither
// deprecated nor removed at the target. Undeterminable findings are kept
// when one of their candidates is deprecated or removed at the target.
func Classify(tab *apilifecycle.Table, target Target, in []Finding) []Finding {
	out := make([]Finding, 0, len(in))
	for _, f := range in {
		if f.Undeterminable {
			var c []string
			for _, av := range f.Candidates {
				if e, ok := tab.Lookup(av, f.Kind); ok && tab.StatusAt(e, target.Release) != apilifecycle.StatusOK {
					c = append(c, av)
				}
			}
			if len(c) == 0 {
				continue
			}
			f.Candidates = c
			f.Status = StatusUnknown
			out = append(out, f)
			continue
		}
		e, ok := lookup(tab, f)
		st := apilifecycle.StatusOK
		if ok {
			st = tab.StatusAt(e, target.Release)
		}
		if f.server != nil && st == apilifecycle.StatusOK {
			// The apiserver says the API is deprecated (a CRD version, or
			// a kind our table does not know): trust it.
			g, v := apilifecycle.SplitAPIVersion(f.APIVersion)
			e = apilifecycle.Entry{Group: g, Version: v, Kind: f.Kind, Resource: f.Resource}
			if r, err := apilifecycle.ParseRelease(f.server.removed); err == nil {
				e.Removed = r
			}
			st = e.StatusAt(target.Release)
			if st == apilifecycle.StatusOK {
				st = apilifecycle.StatusDeprecated
			}
			if f.server.notServed {
				st = apilifecycle.StatusRemoved
			}
		}
		if st == apilifecycle.StatusOK {
			continue
		}
		f.Status = Status(st.String())
		if f.Kind == "" {
			f.Kind = e.Kind
		}
		if f.Resource == "" {
			f.Resource = e.Resource
		}
		f.Deprecated, f.Removed = e.Deprecated, e.Removed
		if !e.Replacement.IsZero() {
			f.Replacement = e.Replacement.String()
			f.ReplacementAvailable = e.ReplacementAvailable
			if target.Served != nil {
				served := target.Served(e.Replacement.APIVersion(), e.Replacement.Kind)
				f.ReplacementServed = &served
			}
		}
		out = append(out, f)
	}
	SortFindings(out)
	return out
}

func lookup(tab *apilifecycle.Table, f Finding) (apilifecycle.Entry, bool) {
	if f.Kind != "" {
		return tab.Lookup(f.APIVersion, f.Kind)
	}
	g, v := apilifecycle.SplitAPIVersion(f.APIVersion)
	return tab.LookupResource(g, v, f.Resource)
}

func statusRank(s Status) int {
	switch s {
	case StatusRemoved:
		return 0
	case StatusUnknown:
		return 1
	}
	return 2
}

// SortFindings orders findings: removed first, then by source, location,
// line, API and who.
func SortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if ra, rb := statusRank(a.Status), statusRank(b.Status); ra != rb {
			return ra < rb
		}
		if a.Source != b.Source {
			return sourceRank(a.Source) < sourceRank(b.Source)
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Location != b.Location {
			return a.Location < b.Location
		}
		if a.APIVersion != b.APIVersion {
			return a.APIVersion < b.APIVersion
		}
		if a.Kind != b.Kind || a.Resource != b.Resource {
			return a.Kind+a.Resource < b.Kind+b.Resource
		}
		if a.Who != b.Who {
			return a.Who < b.Who
		}
		return a.UserAgent+a.Verb < b.UserAgent+b.Verb
	})
}

func sourceRank(s Source) int {
	for i, x := range AllSources {
		if x == s {
			return i
		}
	}
	return len(AllSources)
}

// interesting reports whether an entry is deprecated or removed at any release.
func interesting(e apilifecycle.Entry) bool {
	return !e.Deprecated.IsZero() || !e.Removed.IsZero()
}

// candidatesFor lists the apiVersions in which kind has a deprecation or
// removal, sorted.
func candidatesFor(tab *apilifecycle.Table, kind string) []string {
	var out []string
	for _, e := range tab.Entries() {
		if e.Kind == kind && interesting(e) {
			out = append(out, e.APIVersion())
		}
	}
	sort.Strings(out)
	return out
}

func trimQuotes(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
