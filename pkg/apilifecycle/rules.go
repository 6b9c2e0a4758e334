package apilifecycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// RulesKind is the kind of a rules document in this package's own format:
// `kubectl deprecations rules -o yaml` prints one, so the output of one
// version can be edited and fed back with --rules.
const RulesKind = "APILifecycleTable"

type rulesDoc struct {
	Kind  string  `json:"kind"`
	Items []Entry `json:"items"`
	// pluto's versions file.
	DeprecatedVersions []plutoRow        `json:"deprecated-versions"`
	TargetVersions     map[string]string `json:"target-versions"`
}

// Rules are the contents of a rules file.
type Rules struct {
	// Entries are the lifecycle entries. Kind may be empty: the entry then
	// covers every kind of its group version.
	Entries []Entry
	// ComponentTargets are the versions to check non-Kubernetes components
	// against (pluto's target-versions), by component name.
	ComponentTargets map[string]Release
}

// plutoRow is one row of pluto's versions file.
type plutoRow struct {
	Version                string `json:"version"`
	Kind                   string `json:"kind"`
	DeprecatedIn           string `json:"deprecated-in"`
	RemovedIn              string `json:"removed-in"`
	ReplacementAPI         string `json:"replacement-api"`
	ReplacementAvailableIn string `json:"replacement-available-in"`
	Component              string `json:"component"`
}

// ParseRules reads extra lifecycle entries from a rules file: this
// package's format (a document of kind APILifecycleTable with items, or a
// bare list of entries) or pluto's versions file (deprecated-versions).
// YAML or JSON. name is used in errors and as each entry's Source.
func ParseRules(data []byte, name string) (Rules, error) {
	entries, targets, err := parseRules(data, name)
	return Rules{Entries: entries, ComponentTargets: targets}, err
}

func parseRules(data []byte, name string) ([]Entry, map[string]Release, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil, fmt.Errorf("rules file %s is empty", name)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("rules file %s: %w", name, err)
	}
	var entries []Entry
	targets := map[string]Release{}
	if bytes.HasPrefix(bytes.TrimSpace(js), []byte("[")) {
		if err := json.Unmarshal(js, &entries); err != nil {
			return nil, nil, fmt.Errorf("rules file %s: %w", name, err)
		}
	} else {
		var doc rulesDoc
		if err := json.Unmarshal(js, &doc); err != nil {
			return nil, nil, fmt.Errorf("rules file %s: %w", name, err)
		}
		switch {
		case doc.DeprecatedVersions != nil:
			for c, v := range doc.TargetVersions {
				r, err := ParseRelease(v)
				if err != nil {
					return nil, nil, fmt.Errorf("rules file %s: target-versions %s: %w", name, c, err)
				}
				if c != "k8s" {
					targets[c] = r
				}
			}
			for i, r := range doc.DeprecatedVersions {
				e, err := r.entry()
				if err != nil {
					return nil, nil, fmt.Errorf("rules file %s: deprecated-versions[%d]: %w", name, i, err)
				}
				entries = append(entries, e)
			}
		case doc.Items != nil || doc.Kind == RulesKind:
			entries = doc.Items
		default:
			return nil, nil, fmt.Errorf("rules file %s: want a document of kind %s with items, a list of entries, or pluto's deprecated-versions", name, RulesKind)
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Version == "" {
			return nil, nil, fmt.Errorf("rules file %s: entry %d needs at least a version", name, i)
		}
		if e.Component == "k8s" || e.Component == "kubernetes" {
			e.Component = ""
		}
		if v := e.Version; strings.Contains(v, "/") {
			e.Group, e.Version = SplitAPIVersion(v)
			if e.Version == "" {
				return nil, nil, fmt.Errorf("rules file %s: entry %d: version %q names no version after its group", name, i, v)
			}
		}
		if e.Source == "" {
			e.Source = name
		}
	}
	return entries, targets, nil
}

func (r plutoRow) entry() (Entry, error) {
	if r.Version == "" {
		return Entry{}, fmt.Errorf("version is required")
	}
	g, v := SplitAPIVersion(r.Version)
	if v == "" {
		return Entry{}, fmt.Errorf("version %q names no version after its group", r.Version)
	}
	e := Entry{Group: g, Version: v, Kind: r.Kind, Component: r.Component}
	var err error
	if e.Deprecated, err = ParseRelease(r.DeprecatedIn); err != nil {
		return Entry{}, err
	}
	if e.Removed, err = ParseRelease(r.RemovedIn); err != nil {
		return Entry{}, err
	}
	if r.ReplacementAPI != "" {
		rg, rv := SplitAPIVersion(r.ReplacementAPI)
		e.Replacement = GVK{Group: rg, Version: rv, Kind: r.Kind}
		if e.ReplacementAvailable, err = ParseRelease(r.ReplacementAvailableIn); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}
