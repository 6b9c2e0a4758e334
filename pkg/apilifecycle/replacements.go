package apilifecycle

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"
)

// replacementsYAML adds the replacements the markers do not carry; each row
// names its upstream source and the date it was read.
//
//go:embed replacements.yaml
var replacementsYAML []byte

type replacementRow struct {
	APIVersion           string   `json:"apiVersion"`
	Kinds                []string `json:"kinds"`
	Replacement          string   `json:"replacement"`
	ReplacementAvailable Release  `json:"replacementAvailable"`
	Source               string   `json:"source"`
	Date                 string   `json:"date"`
}

// withReplacements returns entries with the replacements of data applied:
// an entry keeps its own releases and gains Replacement,
// ReplacementAvailable and the row's source beside its own.
func withReplacements(entries []Entry, data []byte) ([]Entry, error) {
	var doc struct {
		Replacements []replacementRow `json:"replacements"`
	}
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return nil, fmt.Errorf("replacements.yaml: %w", err)
	}
	out := append([]Entry(nil), entries...)
	index := map[gvkKey]int{}
	for i, e := range out {
		index[gvkKey{e.Group, e.Version, e.Kind}] = i
	}
	for _, r := range doc.Replacements {
		if r.Source == "" || r.Date == "" || r.ReplacementAvailable.IsZero() {
			return nil, fmt.Errorf("replacements.yaml: %s needs source, date and replacementAvailable", r.APIVersion)
		}
		g, v := SplitAPIVersion(r.APIVersion)
		rg, rv := SplitAPIVersion(r.Replacement)
		for _, k := range r.Kinds {
			i, ok := index[gvkKey{g, v, k}]
			if !ok {
				return nil, fmt.Errorf("replacements.yaml: %s %s is not in the table", r.APIVersion, k)
			}
			out[i].Replacement = GVK{Group: rg, Version: rv, Kind: k}
			out[i].ReplacementAvailable = r.ReplacementAvailable
			out[i].Source += "; replacement: " + r.Source + " (read " + r.Date + ")"
		}
	}
	return out, nil
}

// builtinEntries is the generated table with replacements.yaml applied. The
// embedded file is checked by the package's tests, so a failure here is a
// build defect.
func builtinEntries() []Entry {
	out, err := withReplacements(builtin, replacementsYAML)
	if err != nil {
		panic(err)
	}
	return out
}
