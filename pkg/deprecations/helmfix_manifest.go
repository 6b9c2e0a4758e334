package deprecations

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

//go:embed helmfix_fields.yaml
var fieldRulesYAML []byte

// FieldRule says when the replacement of an API needs more than a new
// apiVersion and kind (helmfix_fields.yaml).
type FieldRule struct {
	APIVersions []string `json:"apiVersions"`
	Kind        string   `json:"kind"`
	MustNotHave []string `json:"mustNotHave,omitempty"`
	MustHave    []string `json:"mustHave,omitempty"`
	Always      bool     `json:"always,omitempty"`
	Change      string   `json:"change"`
}

// FieldRules is the rules file: its source and the rules.
type FieldRules struct {
	Source string      `json:"source"`
	Rules  []FieldRule `json:"rules"`
}

// BuiltinFieldRules returns the embedded field-change rules.
func BuiltinFieldRules() FieldRules {
	var fr FieldRules
	if err := yaml.UnmarshalStrict(fieldRulesYAML, &fr); err != nil {
		panic("helmfix_fields.yaml: " + err.Error()) // embedded data, checked by a unit test
	}
	return fr
}

// violation returns the first reason obj (a decoded manifest document of
// the rule's API) needs a field change, or "".
func (r FieldRule) violation(obj map[string]any) string {
	if r.Always {
		return "every object of this API"
	}
	for _, p := range r.MustNotHave {
		found := false
		walkParents(obj, strings.Split(p, "."), func(parent map[string]any, last string) {
			if _, ok := parent[last]; ok {
				found = true
			}
		})
		if found {
			return "has " + p
		}
	}
	for _, p := range r.MustHave {
		missing := false
		walkParents(obj, strings.Split(p, "."), func(parent map[string]any, last string) {
			if _, ok := parent[last]; !ok {
				missing = true
			}
		})
		if missing {
			return "lacks " + p
		}
	}
	return ""
}

// walkParents calls fn with each map that holds the last segment of path:
// "x[]" steps into every element of the list x; a missing step ends that
// branch.
func walkParents(v any, segs []string, fn func(map[string]any, string)) {
	m, ok := v.(map[string]any)
	if !ok || len(segs) == 0 {
		return
	}
	seg := segs[0]
	if len(segs) == 1 {
		fn(m, strings.TrimSuffix(seg, "[]"))
		return
	}
	if name, ok := strings.CutSuffix(seg, "[]"); ok {
		list, _ := m[name].([]any)
		for _, el := range list {
			walkParents(el, segs[1:], fn)
		}
		return
	}
	walkParents(m[seg], segs[1:], fn)
}

// HelmFixChange is one object whose stored apiVersion (and kind) fix-helm
// rewrites.
type HelmFixChange struct {
	// In is "manifest" or "hook <path>".
	In         string `json:"in"`
	Kind       string `json:"kind"`
	Name       string `json:"name,omitempty"`
	APIVersion string `json:"apiVersion"`
	// Status is removed or deprecated at the target (fail or warn in
	// JSON).
	Status        Status `json:"status"`
	NewAPIVersion string `json:"newAPIVersion"`
	NewKind       string `json:"newKind,omitempty"`
	RemovedIn     string `json:"removedIn,omitempty"`
}

// HelmFixManual is an object fix-helm cannot map alone: the chart has to
// change, and then a plain helm upgrade fixes the record.
type HelmFixManual struct {
	In          string `json:"in"`
	Kind        string `json:"kind"`
	Name        string `json:"name,omitempty"`
	APIVersion  string `json:"apiVersion"`
	Status      Status `json:"status"`
	Replacement string `json:"replacement,omitempty"`
	// Reason says why a pure apiVersion mapping is not enough.
	Reason string `json:"reason"`
	// Change is the chart change to make.
	Change string `json:"change"`
}

// manifestMapper maps the removed (or deprecated) APIs of stored manifests
// to their replacements.
type manifestMapper struct {
	table             *apilifecycle.Table
	target            apilifecycle.Release
	includeDeprecated bool
	served            func(groupVersion, kind string) bool
	rules             map[string]FieldRule // "apiVersion kind"
}

func newManifestMapper(t *apilifecycle.Table, target apilifecycle.Release, includeDeprecated bool, served func(string, string) bool, fr FieldRules) *manifestMapper {
	m := &manifestMapper{table: t, target: target, includeDeprecated: includeDeprecated, served: served, rules: map[string]FieldRule{}}
	for _, r := range fr.Rules {
		for _, av := range r.APIVersions {
			m.rules[av+" "+r.Kind] = r
		}
	}
	return m
}

var (
	apiVersionLine = regexp.MustCompile(`^apiVersion:[ \t]*(["']?)([^"'#\s]+)(["']?)[ \t]*(#.*)?$`)
	kindLine       = regexp.MustCompile(`^kind:[ \t]*(["']?)([^"'#\s]+)(["']?)[ \t]*(#.*)?$`)
)

// mapManifest rewrites the apiVersion (and kind) line of each document of
// manifest whose API is removed at the target (or deprecated, with
// includeDeprecated) and has a replacement that needs no field change.
// Everything else in the text is kept byte for byte. It returns the new
// text, the changes and the objects that need a chart change.
func (m *manifestMapper) mapManifest(in, manifest string) (string, []HelmFixChange, []HelmFixManual) {
	var (
		out     strings.Builder
		changes []HelmFixChange
		manual  []HelmFixManual
	)
	lines := strings.SplitAfter(manifest, "\n")
	flush := func(doc []string) {
		if len(doc) == 0 {
			return
		}
		ch, mn := m.mapDoc(in, doc)
		changes = append(changes, ch...)
		manual = append(manual, mn...)
		for _, l := range doc {
			out.WriteString(l)
		}
	}
	var doc []string
	for _, l := range lines {
		if strings.TrimRight(l, " \t\r\n") == "---" {
			flush(doc)
			doc = nil
			out.WriteString(l)
			continue
		}
		doc = append(doc, l)
	}
	flush(doc)
	return out.String(), changes, manual
}

// mapDoc maps one document in place (its lines).
func (m *manifestMapper) mapDoc(in string, doc []string) ([]HelmFixChange, []HelmFixManual) {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(strings.Join(doc, "")), &obj); err != nil || obj == nil {
		return nil, nil
	}
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if av == "" || kind == "" {
		return nil, nil
	}
	e, ok := m.table.Lookup(av, kind)
	if !ok {
		return nil, nil
	}
	st := m.table.StatusAt(e, m.target)
	if st == apilifecycle.StatusOK || (st == apilifecycle.StatusDeprecated && !m.includeDeprecated) {
		return nil, nil
	}
	name, _ := nestedString(obj, "metadata", "name")
	manual := func(repl, reason, change string) []HelmFixManual {
		return []HelmFixManual{{In: in, Kind: kind, Name: name, APIVersion: av, Status: Status(st.String()), Replacement: repl, Reason: reason, Change: change}}
	}
	repl, ok := m.replacement(e)
	if !ok {
		return nil, manual("", fmt.Sprintf("%s %s has no replacement", av, kind),
			fmt.Sprintf("remove %s %s from the chart (or replace it as the Kubernetes deprecation guide says), then helm upgrade", kind, name))
	}
	if r, ok := m.rules[av+" "+kind]; ok {
		if why := r.violation(obj); why != "" {
			return nil, manual(repl.APIVersion()+" "+repl.Kind, "the replacement needs field changes ("+why+")",
				r.Change+"; change the chart's template, then helm upgrade")
		}
	}
	if m.served != nil && !m.served(repl.APIVersion(), repl.Kind) {
		return nil, manual(repl.APIVersion()+" "+repl.Kind, "the cluster does not serve "+repl.APIVersion()+" "+repl.Kind+" yet",
			"upgrade the cluster to a release that serves "+repl.APIVersion()+" first, then run fix-helm again")
	}
	ai, ki := -1, -1
	for i, l := range doc {
		t := strings.TrimRight(l, "\r\n")
		if ai < 0 && apiVersionLine.MatchString(t) && apiVersionLine.FindStringSubmatch(t)[2] == av {
			ai = i
		}
		if ki < 0 && kindLine.MatchString(t) && kindLine.FindStringSubmatch(t)[2] == kind {
			ki = i
		}
	}
	if ai < 0 || (repl.Kind != kind && ki < 0) {
		return nil, manual(repl.APIVersion()+" "+repl.Kind, "the stored document has no top-level apiVersion/kind line to rewrite",
			"change the chart to use "+repl.APIVersion()+", then helm upgrade")
	}
	doc[ai] = rewriteValue(doc[ai], "apiVersion", repl.APIVersion())
	ch := HelmFixChange{In: in, Kind: kind, Name: name, APIVersion: av, Status: Status(st.String()), NewAPIVersion: repl.APIVersion()}
	if !e.Removed.IsZero() {
		ch.RemovedIn = "v" + e.Removed.String()
	}
	if repl.Kind != kind {
		doc[ki] = rewriteValue(doc[ki], "kind", repl.Kind)
		ch.NewKind = repl.Kind
	}
	return []HelmFixChange{ch}, nil
}

// rewriteValue replaces the value of a top-level "key: value" line,
// keeping its line ending.
func rewriteValue(line, key, value string) string {
	end := line[len(strings.TrimRight(line, "\r\n")):]
	return key + ": " + value + end
}

// replacement follows the table's replacements from e to the first one
// that is not removed at the target (nor deprecated, with
// includeDeprecated, when a further replacement exists).
func (m *manifestMapper) replacement(e apilifecycle.Entry) (apilifecycle.GVK, bool) {
	seen := map[apilifecycle.GVK]bool{e.GVK(): true}
	cur := e
	for {
		r := cur.Replacement
		if r.IsZero() || seen[r] {
			return apilifecycle.GVK{}, false
		}
		seen[r] = true
		if r.Kind == "" {
			r.Kind = cur.Kind
		}
		next, ok := m.table.LookupGVK(r.Group, r.Version, r.Kind)
		if !ok {
			return r, true
		}
		switch m.table.StatusAt(next, m.target) {
		case apilifecycle.StatusRemoved:
			cur = next
			continue
		case apilifecycle.StatusDeprecated:
			if m.includeDeprecated && !next.Replacement.IsZero() {
				if further, ok := m.replacement(next); ok {
					return further, true
				}
			}
		}
		return r, true
	}
}

func nestedString(obj map[string]any, path ...string) (string, bool) {
	var v any = obj
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		v = mm[p]
	}
	s, ok := v.(string)
	return s, ok
}

// describeChanges is a one-line summary of changes for a release
// description: "policy/v1beta1 PodDisruptionBudget -> policy/v1".
func describeChanges(changes []HelmFixChange) string {
	var parts []string
	for _, c := range changes {
		s := c.APIVersion + " " + c.Kind + " -> " + c.NewAPIVersion
		if c.NewKind != "" {
			s += " " + c.NewKind
		}
		if !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}
